package broker

import (
	"fmt"
	"strings"

	"github.com/acme/orders/access"
	"github.com/acme/orders/internal/opsfile"
)

// Entry is one consumer of the intake file: the commands of its subjects act as its principal.
type Entry struct {
	Stream    string `json:"stream"`    // the JetStream stream that holds the commands
	Consumer  string `json:"consumer"`  // the durable consumer's name, shared by every node
	Subject   string `json:"subject"`   // the consumer's filter: a prefix and ".>"
	Principal string `json:"principal"` // whom its commands act as, named as an API key's
	Roles     string `json:"roles"`     // as a keys file names them; client if empty

	roles access.Roles
}

// Prefix is what the tokens naming a command follow in the entry's subjects.
func (e Entry) Prefix() string { return strings.TrimSuffix(e.Subject, ".>") }

// Caller is whom the entry's commands act as.
func (e Entry) Caller() access.Caller { return access.Caller{Principal: e.Principal, Roles: e.roles} }

// Bounds of the intake file.
const (
	MaxEntries    = 64
	maxIntakeFile = 1 << 20
)

// ParseIntake reads an intake file: {"intake":[{"stream":…,"consumer":…,"subject":…,
// "principal":…,"roles":…},…]}. Unknown fields are refused; errors name the entry and field.
func ParseIntake(data []byte) ([]Entry, error) {
	var f struct {
		Intake []Entry `json:"intake"`
	}
	if err := opsfile.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("not an intake file: %w", err)
	}
	if n := len(f.Intake); n == 0 || n > MaxEntries {
		return nil, fmt.Errorf("%d entries in intake; 1 to %d", n, MaxEntries)
	}
	consumers := map[string]int{}
	for i := range f.Intake {
		e := &f.Intake[i]
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("entry %d (consumer %q): %w", i, e.Consumer, err)
		}
		if first, dup := consumers[e.Stream+" "+e.Consumer]; dup {
			return nil, fmt.Errorf("entry %d: consumer %q of stream %q is entry %d's too", i, e.Consumer, e.Stream, first)
		}
		consumers[e.Stream+" "+e.Consumer] = i
	}
	return f.Intake, nil
}

// check checks e's fields and reads its roles.
func (e *Entry) check() (err error) {
	for _, f := range []struct{ name, value string }{{"stream", e.Stream}, {"consumer", e.Consumer}} {
		if f.value == "" || len(f.value) > 64 || strings.ContainsAny(f.value, " \t\r\n.*>/\\") {
			return fmt.Errorf("%s %q: 1 to 64 characters, none of whitespace . * > / \\", f.name, f.value)
		}
	}
	if !validSubject(e.Subject) || !strings.HasSuffix(e.Subject, ".>") || strings.ContainsAny(e.Prefix(), "*>") {
		return fmt.Errorf("subject %q: a subject prefix without wildcards, then .> (orders.cmd.>)", e.Subject)
	}
	if err := access.ValidatePrincipal(e.Principal); err != nil {
		return fmt.Errorf("principal: %w", err)
	}
	e.roles = access.RoleClient
	if e.Roles != "" {
		if e.roles, err = access.ParseRoles(e.Roles); err != nil {
			return fmt.Errorf("roles: %w", err)
		}
	}
	return nil
}

// validSubject reports whether s is a NATS subject: tokens of printable characters without
// whitespace, separated by single dots.
func validSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return false
		}
	}
	return true
}

// ReadIntake reads and parses the intake file at path.
func ReadIntake(path string) ([]Entry, error) {
	data, err := opsfile.Read(path, maxIntakeFile)
	if err != nil {
		return nil, fmt.Errorf("intake file: %w", err)
	}
	entries, err := ParseIntake(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}
