"""Stage 1, the file as written: the tree-sitter source model, launch specs, the safe expression
language and the static facts (taint, barriers, strides) read from the parse tree. No tool runs here."""
