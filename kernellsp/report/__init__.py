"""Stage 7, renderers shared by both faces: findings as text, JSON and SARIF."""
