"""The row-reduction recipe's analysis and code generator (the recipe itself is :mod:`..rowreduce`)."""
