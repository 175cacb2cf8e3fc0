package bytecache

import "testing"

// The cache stays within its budget by forgetting the least recently used values; a value
// larger than the budget is not kept, and a replaced value's bytes are no longer counted.
func TestCacheStaysWithinItsBudget(t *testing.T) {
	c := New[string, int](100, 10)
	c.Add("a", 1, 40)
	c.Add("b", 2, 40)
	c.Get("a") // b is now the least recently used
	c.Add("c", 3, 40)
	if _, ok := c.Get("b"); ok {
		t.Error("b kept past the budget")
	}
	if _, ok := c.Get("a"); !ok {
		t.Error("a, used recently, forgotten")
	}
	if got := c.Bytes(); got != 80 {
		t.Errorf("Bytes = %d, want 80", got)
	}
	if c.Add("huge", 4, 101) {
		t.Error("a value over the whole budget kept")
	}
	c.Add("a", 5, 10)
	if got := c.Bytes(); got != 50 {
		t.Errorf("Bytes after replacing a = %d, want 50", got)
	}
	for i := range 100 {
		c.Add(string(rune('A'+i)), i, 1)
	}
	if c.Len() > 10 {
		t.Errorf("%d values held; a value costs at least 10 bytes of 100", c.Len())
	}
}

// AddUnless keeps a newer value only, and RemoveIf forgets only what its test picks.
func TestAddUnlessAndRemoveIf(t *testing.T) {
	c := New[string, int](100, 1)
	older := func(v int) func(int) bool { return func(held int) bool { return held >= v } }
	c.Add("o", 3, 1)
	if c.AddUnless("o", 2, 1, older(2)) {
		t.Error("an older value replaced a newer one")
	}
	if !c.AddUnless("o", 4, 1, older(4)) {
		t.Error("a newer value refused")
	}
	c.RemoveIf("o", func(held int) bool { return held <= 3 })
	if v, _ := c.Get("o"); v != 4 {
		t.Errorf("o = %d, want 4", v)
	}
	c.RemoveIf("o", func(held int) bool { return held <= 4 })
	if _, ok := c.Get("o"); ok {
		t.Error("o kept")
	}
}

// Len is how many values are held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
