"""The verification gates: edit scope, output comparison, A/B timing, and the gate that runs them."""
