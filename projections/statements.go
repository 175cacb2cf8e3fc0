package projections

import (
	"context"
	"database/sql"
)

// statement is one SQL statement of a batch. It is prepared in the batch's transaction the
// first time the batch runs it, and run from then on for each row: the SQL text is built once
// per batch instead of once per event, and the driver neither looks it up nor parses it again.
// The transaction closes it when it ends.
type statement struct {
	query string
	stmt  *sql.Stmt
}

func (s *statement) exec(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	if s.stmt == nil {
		stmt, err := tx.PrepareContext(ctx, s.query)
		if err != nil {
			return nil, err
		}
		s.stmt = stmt
	}
	return s.stmt.ExecContext(ctx, args...)
}
