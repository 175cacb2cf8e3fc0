package load

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/acme/orders/idempotency"
	"github.com/labstack/echo/v4"
	_ "github.com/mattn/go-sqlite3" // the driver of the service's default store
	"github.com/oklog/ulid/v2"
)

// YardstickBatch bounds the creates committed in one transaction.
const YardstickBatch = 512

// Yardstick is the least a durable keyed create costs on the machine: it decodes a create-order
// body as the baseline does, and one writer inserts it under its Idempotency-Key into SQLite
// (WAL, synchronous=FULL), many creates per transaction, answering each only after the commit.
// A repeated key answers the stored body. It knows creates only, and keeps no events.
type Yardstick struct {
	db      *sql.DB
	queue   chan *keyedCreate
	stopped chan struct{}
}

// keyedCreate is a create waiting for the writer; done receives its answer once committed.
type keyedCreate struct {
	key, location string
	body          []byte
	done          chan storedCreate
}

type storedCreate struct {
	location string
	body     []byte
	position int64 // the row's id, answered as Log-Position
	replayed bool
	err      error
}

// OpenYardstick opens (or creates) the SQLite file at path and starts the writer.
func OpenYardstick(path string) (*Yardstick, error) {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?_journal_mode=WAL&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // the writer's
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS creates (key TEXT PRIMARY KEY, location TEXT NOT NULL, body BLOB NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("yardstick schema: %w", err)
	}
	y := &Yardstick{db: db, queue: make(chan *keyedCreate, YardstickBatch), stopped: make(chan struct{})}
	go y.write()
	return y, nil
}

// Close stops the writer, once the handler has stopped serving, and closes the file.
func (y *Yardstick) Close() error {
	close(y.queue)
	<-y.stopped
	return y.db.Close()
}

// write drains the queue: it takes whatever is queued, without waiting for more, commits it
// in one transaction and only then answers.
func (y *Yardstick) write() {
	defer close(y.stopped)
	batch := make([]*keyedCreate, 0, YardstickBatch)
	for c := range y.queue {
		batch = append(batch[:0], c)
	queued:
		for len(batch) < YardstickBatch {
			select {
			case c, ok := <-y.queue:
				if !ok {
					break queued
				}
				batch = append(batch, c)
			default:
				break queued
			}
		}
		answers, err := y.commit(batch)
		for i, c := range batch {
			if err != nil {
				answers[i] = storedCreate{err: err}
			}
			c.done <- answers[i]
		}
	}
}

func (y *Yardstick) commit(batch []*keyedCreate) ([]storedCreate, error) {
	answers := make([]storedCreate, len(batch))
	tx, err := y.db.Begin()
	if err != nil {
		return answers, err
	}
	defer tx.Rollback()
	for i, c := range batch {
		res, err := tx.Exec(`INSERT INTO creates (key, location, body) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING`, c.key, c.location, c.body)
		if err != nil {
			return answers, err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			pos, _ := res.LastInsertId()
			answers[i] = storedCreate{location: c.location, body: c.body, position: pos}
			continue
		}
		a := storedCreate{replayed: true}
		if err := tx.QueryRow(`SELECT rowid, location, body FROM creates WHERE key = ?`, c.key).Scan(&a.position, &a.location, &a.body); err != nil {
			return answers, err
		}
		answers[i] = a
	}
	return answers, tx.Commit()
}

// Handler serves POST /v1/orders.
func (y *Yardstick) Handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/orders", func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		if err := idempotency.ValidateKey(key); err != nil {
			return c.JSON(http.StatusBadRequest, map[string]string{"type": "/problems/idempotency-key-invalid"})
		}
		var b createBody
		if err := decodeStrict(c.Request().Body, &b); err != nil {
			return c.JSON(http.StatusBadRequest, map[string]string{"type": "/problems/malformed-request", "detail": err.Error()})
		}
		order, err := b.order()
		if err != nil {
			return c.JSON(http.StatusBadRequest, map[string]string{"type": "/problems/malformed-request", "detail": err.Error()})
		}
		body, _ := json.Marshal(order)
		kc := &keyedCreate{key: key, location: "/v1/orders/" + order.ID, body: append(body, '\n'), done: make(chan storedCreate, 1)}
		y.queue <- kc
		a := <-kc.done
		if a.err != nil {
			return c.JSON(http.StatusInternalServerError, map[string]string{"type": "/problems/internal", "detail": a.err.Error()})
		}
		h := c.Response().Header()
		h.Set("Location", a.location)
		h.Set("ETag", `"1"`)
		h.Set("Log-Position", strconv.FormatInt(a.position, 10))
		if a.replayed {
			h.Set("Idempotent-Replayed", "true")
		}
		return c.Blob(http.StatusCreated, echo.MIMEApplicationJSON, a.body)
	})
	return e
}

// order is the order b creates, as the service answers it.
func (b createBody) order() (baselineOrder, error) {
	if b.CustomerID == nil || b.Currency == nil || len(b.Lines) == 0 {
		return baselineOrder{}, errors.New("customerId, currency and lines are required")
	}
	now := time.Now().UTC()
	o := baselineOrder{ID: ulid.Make().String(), CustomerID: *b.CustomerID, Currency: *b.Currency, Status: "created",
		Version: 1, CreatedAt: now, UpdatedAt: now}
	for _, l := range b.Lines {
		if l.SKU == nil || l.Quantity == nil || l.UnitPrice == nil {
			return baselineOrder{}, errors.New("a line needs sku, quantity and unitPrice")
		}
		o.Lines = append(o.Lines, lineBody{SKU: *l.SKU, Quantity: *l.Quantity, UnitPrice: *l.UnitPrice})
		o.Total += *l.Quantity * *l.UnitPrice
	}
	return o, nil
}
