"""What must hold: the spec's invariants I1-I6 and the checks built on them."""
