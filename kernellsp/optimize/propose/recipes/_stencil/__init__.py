"""The stencil recipe's analysis and code generator (the recipe itself is :mod:`..stencil`)."""
