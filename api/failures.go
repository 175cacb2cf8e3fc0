package api

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// A 5xx answer tells the client to come back (Retry-After) and the operator why, in one log
// line. Under a storm (a full disk answers every command 503) a line per answer would flood
// the log: lines are limited per problem, and each says how many were held back.

// noteCause records err as the cause of the answer of the request whose context (or a context
// derived from it) is ctx, should the answer be a 5xx.
func noteCause(ctx context.Context, err error) {
	if err == nil {
		return
	}
	if r := requestOf(ctx); r != nil {
		r.cause.Store(&err)
	}
}

// answerFailures gives every 5xx answer a Retry-After, whoever writes it (an error, a command's
// outcome, the metrics handler), and logs its cause: at most a line a second per problem.
func (s *Server) answerFailures(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		res := c.Response()
		res.Before(func() {
			if res.Status >= 500 && res.Header().Get("Retry-After") == "" {
				res.Header().Set("Retry-After", "1")
			}
		})
		err := next(c)
		if res.Status >= 500 {
			var cause error
			if p := stateOf(c).cause.Load(); p != nil {
				cause = *p
			}
			s.logFailure(c, res.Status, cause)
		}
		return err
	}
}

// logFailure logs the cause of a 5xx answer, unless a line of the same problem was logged less
// than a second ago; the next line written says how many were held back.
func (s *Server) logFailure(c echo.Context, status int, cause error) {
	code := strconv.Itoa(status)
	for _, p := range problemTypes {
		if p.status == status {
			code = p.code // one problem per 5xx status
			break
		}
	}
	ok, held := s.failures.allow(code)
	if !ok {
		return
	}
	text := "none recorded"
	if cause != nil {
		text = cause.Error()
	}
	s.Log.LogAttrs(c.Request().Context(), slog.LevelError, "server error",
		slog.String("method", methodLabel(c.Request().Method)),
		slog.String("route", c.Path()),
		slog.Int("status", status),
		slog.String("problem", code),
		slog.String("cause", text),
		slog.Int("held_back", held))
}

// logLimiter lets through at most one log line per interval of each kind, and counts the lines
// it holds back. Kinds are a closed set (problem codes, statuses), so its map stays small. A
// count held back when a storm ends is never written; the metrics count every answer.
type logLimiter struct {
	every time.Duration
	now   func() time.Time // time.Now; tests set another clock

	mu    sync.Mutex
	kinds map[string]*logKind
}

type logKind struct {
	last time.Time // when the last line of the kind was let through
	held int       // lines held back since
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, now: time.Now, kinds: map[string]*logKind{}}
}

// allow reports whether a line of kind may be written now and, if so, how many lines of the
// kind were held back since the last one written.
func (l *logLimiter) allow(kind string) (bool, int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[kind]
	if k == nil {
		k = &logKind{}
		l.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < l.every {
		k.held++
		return false, 0
	}
	held := k.held
	k.last, k.held = now, 0
	return true, held
}
