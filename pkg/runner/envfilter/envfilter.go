package envfilter

import (
	"slices"
	"strings"
)

// forbiddenPrefixes are the name prefixes J6 removes. Matching is
// case-sensitive on purpose: on Linux the environment is case-sensitive,
// Terraform looks its variables up with os.Getenv and strings.HasPrefix on the
// exact upper-case spellings (TF_VAR_, TF_LOG, TF_CLI_ARGS, ...), and the
// kubernetes and helm providers read KUBE_* the same way. A variable such as
// tf_var_x or Kube_token is therefore invisible to all of them and is kept,
// exactly as a shell would pass it on. (Windows folds case, but the runner
// only runs in Linux containers.)
var forbiddenPrefixes = []string{"TF_", "KUBE_"}

// forbiddenNames are whole names B7 adds to the J6 classes, matched exactly
// and case-sensitively like the prefixes:
//   - TERRAFORM_CONFIG is the legacy name of TF_CLI_CONFIG_FILE: Terraform
//     still reads it, so it would redirect provider installation and the
//     credentials helpers exactly as the TF_ name the prefix already drops.
//   - GODEBUG tunes the Go runtime of Terraform and every provider plugin;
//     GODEBUG=http2debug=2 makes net/http print request headers, i.e.
//     Authorization headers and API keys, into the Job log.
var forbiddenNames = map[string]bool{
	"TERRAFORM_CONFIG": true,
	"GODEBUG":          true,
}

// allowed are the J3 variables the Job sets through its own env. They must
// survive the filter: they are what keeps Terraform non-interactive and
// tells the module its namespace.
var allowed = map[string]bool{
	"TF_IN_AUTOMATION": true,
	"TF_INPUT":         true,
	"KUBE_NAMESPACE":   true,
}

// Forbidden reports whether J6 (or B7) removes a variable with this name. It is
// exported so that other parts of captf (the C4 hygiene report) can tell
// users which of their keys the runner will drop, using the same rule.
func Forbidden(name string) bool {
	if allowed[name] {
		return false
	}
	if forbiddenNames[name] {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Name returns the name part of an environment entry: everything before the
// first '=', since values may themselves contain '='. An entry without '='
// is not a well-formed variable; its whole text is treated as the name, so
// a bare "TF_LOG" is still dropped while nothing of a value can leak.
func Name(entry string) string {
	name, _, _ := strings.Cut(entry, "=")
	return name
}

// Filter splits environ (os.Environ form, "NAME=value") into the entries to
// pass to Terraform and the names of the removed ones.
//
// kept preserves the input order and any duplicates, so the usual
// last-one-wins rule still applies downstream; malformed entries (no '=',
// empty) pass through untouched unless their name is forbidden. dropped holds
// names only, never values, sorted and de-duplicated so that it can be logged
// as one stable line.
func Filter(environ []string) (kept, dropped []string) {
	kept = make([]string, 0, len(environ))
	for _, entry := range environ {
		name := Name(entry)
		if Forbidden(name) {
			dropped = append(dropped, name)
			continue
		}
		kept = append(kept, entry)
	}
	slices.Sort(dropped)
	return kept, slices.Compact(dropped)
}
