package command

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestQueuesRunOneOrderAtATimeAndForgetIdleOrders(t *testing.T) {
	var qs queues
	ctx := context.Background()
	var mu sync.Mutex
	running, most := 0, 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			leave, err := qs.enter(ctx, "o1")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(time.Millisecond) // for the others to come in, were they let in
			mu.Lock()
			running--
			mu.Unlock()
			leave()
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d commands ran on one order at once, want 1", most)
	}
	if n := qs.len(); n != 0 {
		t.Errorf("%d queues left with no command in flight, want 0", n)
	}
	leave, _ := qs.enter(ctx, "o1")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := qs.enter(cancelled, "o1"); err == nil {
		t.Error("a command waiting with its context ended entered the queue")
	}
	other, err := qs.enter(ctx, "o2")
	if err != nil {
		t.Fatalf("another order waited for o1: %v", err)
	}
	other()
	leave()
	if n := qs.len(); n != 0 {
		t.Errorf("%d queues left, want 0", n)
	}
}

// len is how many orders have a command running or waiting.
func (qs *queues) len() int {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return len(qs.m)
}
