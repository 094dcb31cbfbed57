package report

import "nodeconverge/engine/redact"

// RedactText replaces the values of credential keys in file text; see
// redact.Text.
func RedactText(s string) string { return redact.Text(s) }
