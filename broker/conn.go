package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Connect connects to the NATS server at url as name, with the credentials of the file creds
// (if not "") or those of the URL, reconnecting by itself forever. Every event of the
// connection is logged, never its URL's credentials (redact masks them in errors).
func Connect(url, creds, name string, log *slog.Logger, redact func(string) string) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats disconnected", "error", redactErr(err, redact))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "server", nc.ConnectedServerId()) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats", "error", redactErr(err, redact))
		}),
	}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: %s", redact(err.Error()))
	}
	return nc, nil
}

func redactErr(err error, redact func(string) string) string {
	if err == nil {
		return ""
	}
	return redact(err.Error())
}

// State names the connection's state, lower case: connected, connecting, reconnecting,
// disconnected or closed.
func State(nc *nats.Conn) string { return strings.ToLower(nc.Status().String()) }

// Streams is how the service makes the JetStream streams it writes to when they are missing:
// file storage, limits-based retention with these bounds, a window in which a repeated
// Nats-Msg-Id is stored once. An existing stream is used as it is.
type Streams struct {
	MaxAge     time.Duration
	MaxBytes   int64
	Duplicates time.Duration
}

// Ensure makes stream name with subjects unless it exists.
func (s Streams) Ensure(ctx context.Context, js jetstream.JetStream, name string, subjects ...string) error {
	_, err := js.Stream(ctx, name)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		MaxAge: s.MaxAge, MaxBytes: s.MaxBytes, Discard: jetstream.DiscardOld, Duplicates: s.Duplicates,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil // another node made it meanwhile
	}
	return err
}
