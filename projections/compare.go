package projections

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acme/orders/eventstore"
)

// Comparison is what a rebuild's next generation changes in a projection's rows, against
// the live generation at the same log position, before either is swapped in or dropped.
type Comparison struct {
	Live     int                 `json:"live"` // the live generation
	Next     int                 `json:"next"` // the next one, built by the rebuild
	At       eventstore.Position `json:"-"`    // both had applied the log up to it
	Added    uint64              `json:"added"`
	Removed  uint64              `json:"removed"`
	Changed  uint64              `json:"changed"`
	Tables   []TableComparison   `json:"tables"`
	Samples  []RowChange         `json:"samples"` // at most MaxSamples, in table and key order
	Swapped  bool                `json:"swapped"` // the next generation went live; else it was dropped
	Started  time.Time           `json:"started"` // when the rebuild started
	Finished time.Time           `json:"finished"`
}

// TableComparison counts one table's changes.
type TableComparison struct {
	Table   string `json:"table"`
	Added   uint64 `json:"added"`
	Removed uint64 `json:"removed"`
	Changed uint64 `json:"changed"`
}

// RowChange is a row that the next generation adds, removes or changes.
type RowChange struct {
	Table  string         `json:"table"`
	Change string         `json:"change"` // "added", "removed" or "changed"
	Key    map[string]any `json:"key"`
	// Columns are the row's values that differ: all of an added or removed row's, the changed
	// ones of a changed row. Long texts and blobs are cut to MaxSampleValue bytes.
	Columns []ColumnChange `json:"columns"`
}

// ColumnChange is a column's value in the live generation and in the next one (nil where the
// row or the column does not exist).
type ColumnChange struct {
	Column string `json:"column"`
	Live   any    `json:"live"`
	Next   any    `json:"next"`
}

// Bounds of a comparison: it holds one page of each generation's rows and its samples.
const (
	MaxSamples     = 20
	MaxSampleValue = 256
	comparePage    = 500
)

// compareGenerations compares every table of p between generations live and next, table by
// table, each as two scans ordered by its primary key (pages of comparePage rows by keyset)
// merged as they go: memory holds a page of each, never a table. A table without a primary
// key is keyed by all its columns, so that a changed row shows as one removed and one added.
func compareGenerations(ctx context.Context, db *sql.DB, p Projection, live, next int) (Comparison, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return Comparison{}, err
	}
	defer conn.Close()
	// A deferred (read) transaction: the driver would begin an immediate one, which would hold
	// up the other projections' writes for as long as the comparison reads.
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return Comparison{}, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
	c := Comparison{Live: live, Next: next, Tables: []TableComparison{}, Samples: []RowChange{}}
	liveT, nextT := tablesOf(p, live), tablesOf(p, next)
	for _, base := range p.Tables() {
		tc, err := compareTable(ctx, conn, base, liveT[base], nextT[base], &c)
		if err != nil {
			return Comparison{}, fmt.Errorf("compare %s: %w", base, err)
		}
		c.Tables = append(c.Tables, tc)
		c.Added, c.Removed, c.Changed = c.Added+tc.Added, c.Removed+tc.Removed, c.Changed+tc.Changed
	}
	return c, nil
}

// tableShape is what a comparison needs of a table's schema.
type tableShape struct {
	columns []string
	key     []string // primary key columns in key order; every column when it has none
}

func shapeOf(ctx context.Context, conn *sql.Conn, table string) (tableShape, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return tableShape{}, err
	}
	defer rows.Close()
	var s tableShape
	pk := map[int]string{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return tableShape{}, err
		}
		s.columns = append(s.columns, name)
		if n > 0 {
			pk[n] = name
		}
	}
	if err := rows.Err(); err != nil {
		return tableShape{}, err
	}
	for i := 1; i <= len(pk); i++ {
		s.key = append(s.key, pk[i])
	}
	if len(s.key) == 0 {
		s.key = s.columns
	}
	return s, nil
}

// compareTable merges the ordered scans of the live and the next table, counting into a
// TableComparison and adding samples to c while it has room.
func compareTable(ctx context.Context, conn *sql.Conn, base, liveTable, nextTable string, c *Comparison) (TableComparison, error) {
	tc := TableComparison{Table: base}
	live, next, err := scansOf(ctx, conn, liveTable, nextTable)
	if err != nil {
		return tc, err
	}
	key, columns := next.key, next.columns
	lrow, err := live.next(ctx)
	if err != nil {
		return tc, err
	}
	nrow, err := next.next(ctx)
	if err != nil {
		return tc, err
	}
	for lrow != nil || nrow != nil {
		order := 0
		switch {
		case lrow == nil:
			order = 1
		case nrow == nil:
			order = -1
		default:
			order = compareKeys(lrow[:len(key)], nrow[:len(key)])
		}
		switch {
		case order < 0: // only live has it
			tc.Removed++
			c.sample(base, "removed", key, columns, lrow, nil)
			lrow, err = live.next(ctx)
		case order > 0:
			tc.Added++
			c.sample(base, "added", key, columns, nil, nrow)
			nrow, err = next.next(ctx)
		default:
			if !sameRow(lrow, nrow) {
				tc.Changed++
				c.sample(base, "changed", key, columns, lrow, nrow)
			}
			if lrow, err = live.next(ctx); err == nil {
				nrow, err = next.next(ctx)
			}
		}
		if err != nil {
			return tc, err
		}
	}
	return tc, nil
}

// scansOf prepares the scans of the live and the next table: by the next table's key, which
// the live one must share, over the columns of either (one a table lacks reads as NULL).
func scansOf(ctx context.Context, conn *sql.Conn, liveTable, nextTable string) (live, next *keysetScan, err error) {
	ls, err := shapeOf(ctx, conn, liveTable)
	if err != nil {
		return nil, nil, err
	}
	ns, err := shapeOf(ctx, conn, nextTable)
	if err != nil {
		return nil, nil, err
	}
	if strings.Join(ls.key, ",") != strings.Join(ns.key, ",") {
		return nil, nil, fmt.Errorf("the live table is keyed by (%s), the next by (%s): their rows cannot be matched",
			strings.Join(ls.key, ", "), strings.Join(ns.key, ", "))
	}
	columns := append([]string(nil), ns.columns...)
	for _, col := range ls.columns {
		if !contains(columns, col) {
			columns = append(columns, col)
		}
	}
	live = &keysetScan{conn: conn, table: liveTable, key: ns.key, columns: columns, has: ls.columns}
	next = &keysetScan{conn: conn, table: nextTable, key: ns.key, columns: columns, has: ns.columns}
	return live, next, nil
}

// keysetScan reads a table in key order, a page at a time, each page after the last key of
// the one before.
type keysetScan struct {
	conn    *sql.Conn
	table   string
	key     []string
	columns []string // key columns first, then the rest; those not in has read as NULL
	has     []string
	page    [][]any
	last    []any // the key of the last row read
	done    bool
}

func (s *keysetScan) next(ctx context.Context) ([]any, error) {
	if len(s.page) == 0 && !s.done {
		if err := s.fill(ctx); err != nil {
			return nil, err
		}
	}
	if len(s.page) == 0 {
		return nil, nil
	}
	row := s.page[0]
	s.page[0] = nil
	s.page = s.page[1:]
	return row, nil
}

func (s *keysetScan) fill(ctx context.Context) error {
	var sel []string
	for _, col := range s.selected() {
		if contains(s.has, col) {
			sel = append(sel, quoteIdent(col))
		} else {
			sel = append(sel, "NULL")
		}
	}
	keys := make([]string, len(s.key))
	marks := make([]string, len(s.key))
	for i, k := range s.key {
		keys[i], marks[i] = quoteIdent(k), "?"
	}
	query := `SELECT ` + strings.Join(sel, ", ") + ` FROM ` + quoteIdent(s.table)
	if s.last != nil {
		query += ` WHERE (` + strings.Join(keys, ", ") + `) > (` + strings.Join(marks, ", ") + `)`
	}
	query += ` ORDER BY ` + strings.Join(keys, ", ") + ` LIMIT ` + fmt.Sprint(comparePage)
	rows, err := s.conn.QueryContext(ctx, query, s.last...)
	if err != nil {
		return err
	}
	defer rows.Close()
	s.page = s.page[:0]
	for rows.Next() {
		row := make([]any, len(sel))
		ptrs := make([]any, len(row))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		s.page = append(s.page, row)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(s.page) < comparePage {
		s.done = true
	}
	if len(s.page) > 0 {
		s.last = s.page[len(s.page)-1][:len(s.key)]
	}
	return nil
}

// selected is the key columns, then the other columns.
func (s *keysetScan) selected() []string {
	out := append([]string(nil), s.key...)
	for _, col := range s.columns {
		if !contains(s.key, col) {
			out = append(out, col)
		}
	}
	return out
}

// sample adds a row change to c's samples while it has fewer than MaxSamples.
func (c *Comparison) sample(table, change string, key, columns []string, live, next []any) {
	if len(c.Samples) >= MaxSamples {
		return
	}
	rc := RowChange{Table: table, Change: change, Key: map[string]any{}, Columns: []ColumnChange{}}
	row := live
	if row == nil {
		row = next
	}
	for i, k := range key {
		rc.Key[k] = sampleValue(row[i])
	}
	order := (&keysetScan{key: key, columns: columns}).selected()
	for i := len(key); i < len(order); i++ {
		var l, n any
		if live != nil {
			l = live[i]
		}
		if next != nil {
			n = next[i]
		}
		if change == "changed" && sameValue(l, n) {
			continue
		}
		rc.Columns = append(rc.Columns, ColumnChange{Column: order[i], Live: sampleValue(l), Next: sampleValue(n)})
	}
	c.Samples = append(c.Samples, rc)
}

// sampleValue is v as a sample shows it: text for valid UTF-8 bytes, cut to MaxSampleValue.
func sampleValue(v any) any {
	var s string
	switch v := v.(type) {
	case []byte:
		if !utf8.Valid(v) {
			if len(v) > MaxSampleValue {
				v = v[:MaxSampleValue]
			}
			return append([]byte(nil), v...) // JSON shows it in base64
		}
		s = string(v)
	case string:
		s = v
	default:
		return v
	}
	if len(s) > MaxSampleValue {
		cut := MaxSampleValue
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func sameRow(a, b []any) bool {
	for i := range a {
		if !sameValue(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool { return compareValues(a, b) == 0 }

func compareKeys(a, b []any) int {
	for i := range a {
		if c := compareValues(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// compareValues orders values as SQLite does with the BINARY collation: NULL, then numbers,
// then text, then blobs.
func compareValues(a, b any) int {
	ra, rb := valueRank(a), valueRank(b)
	if ra != rb {
		return ra - rb
	}
	switch a := a.(type) {
	case int64:
		if b, ok := b.(int64); ok {
			return cmpOrdered(a, b)
		}
		return cmpOrdered(float64(a), b.(float64))
	case float64:
		if b, ok := b.(int64); ok {
			return cmpOrdered(a, float64(b))
		}
		return cmpOrdered(a, b.(float64))
	case string:
		return strings.Compare(a, textOf(b))
	case []byte:
		return bytes.Compare(a, b.([]byte))
	}
	return 0
}

func valueRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case int64, float64:
		return 1
	case string:
		return 2
	default:
		return 3
	}
}

func textOf(v any) string { s, _ := v.(string); return s }

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
