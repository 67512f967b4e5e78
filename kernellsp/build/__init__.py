"""Stage 2, what the compiler says: the toolchain, the nvcc/ptxas build with per-kernel resources and
per-line SASS classes, and the occupancy calculator."""
