"""Shared analysis of the matrix-product recipes (matmul, matvec): one dot product per output.

A naive product kernel gives each thread one output element (one point ``(i, j)`` of C, or one ``i``
of y), and computes it as ``acc = init; for (k = 0; k < K; ++k) acc += X[..k..] * Y[..k..];
out[..] = f(acc, out[..])``. :func:`analyse` finds exactly that shape on the kernel IR, whatever the
spelling of the thread-to-output mapping (2-D launch either way round, a 1-D launch split with ``/``
and ``%``, a 1-D block split into rows and columns, ``blockIdx.z`` or an outer loop over a batch), and
rewrites every index over the output's coordinates (:mod:`._memshape`'s ``solve_coordinates``),
the reduction variable ``k`` and the batch variable. The recipes read layouts and strides off those
polynomials. It declines, with the reason, when anything else happens in the kernel: another store,
a second accumulation, a barrier or atomic, a call outside the output expression, a guard that is
not a bounds check, a non-affine index, a loop that is not ``k = 0 .. K-1`` step 1.

The output expression ``f`` and the initial value keep the user's own text, with ``{acc}`` for the
sum, ``{c}`` for the output's old value and ``{i}``/``{j}`` for the row and column inside reads of
other arrays (a bias ``b[j]``), so the generated kernel computes exactly what the naive one did.
"""
