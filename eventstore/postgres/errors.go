package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/acme/orders/eventstore"
	"github.com/jackc/pgx/v5/pgconn"
)

// contractErrors are the contract's own errors, which a store's call returns as they are.
var contractErrors = []error{
	eventstore.ErrWrongExpectedRevision, eventstore.ErrDuplicateEventID, eventstore.ErrInvalidArgument,
	eventstore.ErrStreamNotFound, eventstore.ErrClosed, eventstore.ErrUnavailable,
}

// fault translates err, an error of a call made with ctx, into the contract's vocabulary at
// the package's edge: the contract's errors as they are, anything after Close as ErrClosed,
// anything once ctx has ended as ctx's error, the server's verdict on data it cannot store as
// ErrInvalidArgument or ErrDuplicateEventID, and the rest (connections, timeouts) as
// ErrUnavailable. The message never holds the database password, and the driver's errors are
// kept as their message alone: deeper down they might hold it.
func (s *Store) fault(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	for _, own := range contractErrors {
		if errors.Is(err, own) {
			return err
		}
	}
	msg := s.redact(err.Error())
	switch {
	case s.closed.Load():
		return fmt.Errorf("%s: %w", msg, eventstore.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", msg, ctx.Err())
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pgErr.Code == "23505" && pgErr.TableName == "events" && pgErr.ConstraintName == "events_id_key":
			return fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, msg)
		case strings.HasPrefix(pgErr.Code, "22"): // data exception: a value the server cannot take
			return fmt.Errorf("%w: %s", eventstore.ErrInvalidArgument, msg)
		}
	}
	return fmt.Errorf("%w: %s", eventstore.ErrUnavailable, msg)
}

// redact replaces the database password in msg (see Redact).
func (s *Store) redact(msg string) string { return Redact(msg, s.password) }

// Redact masks each secret in msg, as given and as a URL would escape it: how a database URL's
// password is kept out of what is shown. A short secret may mask other words too: better an
// odd message than one that shows it.
func Redact(msg string, secrets ...string) string {
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		for _, form := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret)} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}

// dataRejected reports whether err is the server's refusal of a value that one request may
// have brought: a data exception (class 22), a constraint (23) or a limit (54). Then the other
// requests of its batch may succeed without it. A timeout, a lost connection or a server in
// trouble would fail them alone just the same.
func dataRejected(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	if !ok {
		return false
	}
	switch pgErr.Code[:min(2, len(pgErr.Code))] {
	case "22", "23", "54":
		return true
	}
	return false
}

// errNotText reports a string that PostgreSQL cannot store as text.
var errNotText = errors.New("not valid UTF-8 without NUL bytes")

// validText checks that PostgreSQL can store s as text: valid UTF-8 without NUL bytes.
func validText(what, s string) error {
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s %q: %w", eventstore.ErrInvalidArgument, what, s, errNotText)
	}
	return nil
}

// validAppends checks what PostgreSQL needs of appends beyond eventstore.ValidateAppend.
func validAppends(appends []eventstore.StreamAppend) error {
	for _, a := range appends {
		if err := validText("stream", a.Stream); err != nil {
			return err
		}
		for _, e := range a.Events {
			if err := validText("event type", e.Type); err != nil {
				return err
			}
		}
	}
	return nil
}

// validFilter checks that a filter's prefixes are text.
func validFilter(f eventstore.Filter) error {
	for _, p := range slices.Concat(f.StreamPrefixes, f.ExcludeStreamPrefixes) {
		if err := validText("stream prefix", p); err != nil {
			return err
		}
	}
	return nil
}
