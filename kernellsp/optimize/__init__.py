"""Stage 6, propose, verify, apply: proposers (recipes, tuner, LLM), the verification gates
(scope, correctness, sanitizer, timing) and the loop that applies a verified winner with evidence."""
