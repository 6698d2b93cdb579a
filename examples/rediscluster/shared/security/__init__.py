"""The operator's security checks: pure functions a reconciler and the admission webhook call."""
