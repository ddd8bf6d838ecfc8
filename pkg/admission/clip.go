package admission

import (
	"fmt"
	"strings"
)

// MaxLoggedNameLen bounds a username or an object name in a log line (SPEC
// B14): tenants choose both (an authenticator passes usernames through;
// API names run to 253 characters), and must not be able to bloat the
// manager's logs.
const MaxLoggedNameLen = 64

// ClipName returns s cut to MaxLoggedNameLen bytes, at a rune boundary,
// followed by a marker saying how many bytes were cut; s when short enough.
func ClipName(s string) string {
	if len(s) <= MaxLoggedNameLen {
		return s
	}
	head := strings.ToValidUTF8(s[:MaxLoggedNameLen], "")
	return fmt.Sprintf("%s...(%d more bytes)", head, len(s)-len(head))
}
