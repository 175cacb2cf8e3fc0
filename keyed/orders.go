package keyed

import (
	"context"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/idempotency"
)

// OrderCommand is a command on an order, as the pipeline runs it on the order its key is
// claimed with: the request's, a create's id drawn by the intake (Request.OrderID), or, on a
// takeover, the first claim's.
type OrderCommand struct {
	Command  order.Command
	Metadata command.Metadata
	Options  []command.Option // command.At for If-Match
	// Create: the command creates its order, under an id drawn for it, so that a new claim's
	// plan needs no read of the order (command.NewOrder).
	Create bool
	// Render turns what the command on order orderID came to into the answer sent, stored and
	// replayed. It must be pure: it is called before the append, for the record of a key
	// written with the order's events, and after it.
	Render func(orderID string, res command.Result, err error) idempotency.Outcome
}

func (cmd OrderCommand) plan(ctx context.Context, p *Pipeline, orderID string, fresh bool) plan {
	opts := cmd.Options
	if cmd.Create && fresh {
		opts = append(opts[:len(opts):len(opts)], command.NewOrder())
	}
	return orderPlan{Plan: p.Orders.Plan(ctx, orderID, cmd.Command, cmd.Metadata, opts...), cmd: cmd, id: orderID}
}

// orderPlan is a command.Plan as the pipeline carries it out.
type orderPlan struct {
	*command.Plan
	cmd OrderCommand
	id  string
}

func (o orderPlan) answer() ran {
	return ran{out: o.cmd.Render(o.id, o.Result, o.Err), err: o.Err, repeated: o.Result.Repeated, appended: len(o.Result.Events) > 0}
}

// at: the order's event, the last append's.
func (o orderPlan) at() idempotency.At {
	if len(o.Appends) == 0 {
		return idempotency.At{}
	}
	own := o.Appends[len(o.Appends)-1]
	return idempotency.At{PositionStream: own.Stream, PositionRevision: o.Result.Revision}
}

func (o orderPlan) position() uint64 { return o.Result.Position.Commit }

func (o orderPlan) keep() { o.Keep() }
