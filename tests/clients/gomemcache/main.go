// One scenario of gomemcache (github.com/bradfitz/gomemcache, the Go memcached client) against a
// memcached server: test_mc_clients_more.py runs it against tablesocket and against memcached
// 1.6.18 and compares the outputs step by step. Prints one JSON object per step: the step's name,
// its result, and the error the client returned (by gomemcache's error values, or its text).
//
// Usage: gomemcache-scenario <host:port> <key prefix>
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

var out = json.NewEncoder(os.Stdout)

func errName(err error) interface{} {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, memcache.ErrCacheMiss):
		return "ErrCacheMiss"
	case errors.Is(err, memcache.ErrCASConflict):
		return "ErrCASConflict"
	case errors.Is(err, memcache.ErrNotStored):
		return "ErrNotStored"
	case errors.Is(err, memcache.ErrMalformedKey):
		return "ErrMalformedKey"
	case errors.Is(err, memcache.ErrServerError):
		return "ErrServerError"
	}
	return err.Error()
}

func step(name string, result interface{}, err error) {
	out.Encode(map[string]interface{}{"step": name, "result": result, "err": errName(err)})
}

// item describes what a Get returned (the value itself when short).
func item(it *memcache.Item) interface{} {
	if it == nil {
		return nil
	}
	d := map[string]interface{}{"flags": it.Flags, "len": len(it.Value)}
	if len(it.Value) <= 64 {
		d["value"] = string(it.Value)
	}
	return d
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gomemcache-scenario <host:port> <key prefix>")
		os.Exit(2)
	}
	c := memcache.New(os.Args[1])
	c.Timeout = 10 * time.Second
	c.MaxIdleConns = 64
	p := os.Args[2]
	k := func(s string) string { return p + s }

	step("ping", nil, c.Ping())

	// storage and retrieval
	step("set", nil, c.Set(&memcache.Item{Key: k("a"), Value: []byte("alpha"), Flags: 7}))
	it, err := c.Get(k("a"))
	step("get", item(it), err)
	it, err = c.Get(k("missing"))
	step("get miss", item(it), err)
	step("add existing", nil, c.Add(&memcache.Item{Key: k("a"), Value: []byte("x")}))
	step("add new", nil, c.Add(&memcache.Item{Key: k("added"), Value: []byte("new")}))
	step("replace missing", nil, c.Replace(&memcache.Item{Key: k("nope"), Value: []byte("x")}))
	step("replace existing", nil, c.Replace(&memcache.Item{Key: k("added"), Value: []byte("replaced"), Flags: 3}))
	it, err = c.Get(k("added"))
	step("get replaced", item(it), err)
	step("append", nil, c.Append(&memcache.Item{Key: k("a"), Value: []byte(">>")}))
	step("prepend", nil, c.Prepend(&memcache.Item{Key: k("a"), Value: []byte("<<")}))
	it, err = c.Get(k("a"))
	step("get appended", item(it), err)
	step("append missing", nil, c.Append(&memcache.Item{Key: k("nope"), Value: []byte("x")}))

	// multi-get: 50 stored, 50 missing, every value checked
	var keys []string
	for i := 0; i < 100; i++ {
		keys = append(keys, k(fmt.Sprintf("m%03d", i)))
		if i%2 == 0 {
			c.Set(&memcache.Item{Key: keys[i], Value: []byte(fmt.Sprintf("value %d", i)), Flags: uint32(i)})
		}
	}
	got, err := c.GetMulti(keys)
	right := 0
	for i, key := range keys {
		if g, ok := got[key]; ok && i%2 == 0 && string(g.Value) == fmt.Sprintf("value %d", i) && g.Flags == uint32(i) {
			right++
		}
	}
	step("get multi", map[string]int{"found": len(got), "right": right}, err)

	// compare and swap
	it, err = c.Get(k("a"))
	step("gets", item(it), err)
	if it != nil {
		it.Value = []byte("swapped")
		step("cas", nil, c.CompareAndSwap(it))
		it.Value = []byte("stale")
		step("cas stale", nil, c.CompareAndSwap(it))
		c.Delete(k("a"))
		step("cas deleted", nil, c.CompareAndSwap(it))
	}

	// delete
	step("delete", nil, c.Delete(k("added")))
	step("delete miss", nil, c.Delete(k("added")))

	// counters
	c.Set(&memcache.Item{Key: k("n"), Value: []byte("41")})
	n, err := c.Increment(k("n"), 1)
	step("incr", n, err)
	n, err = c.Decrement(k("n"), 2)
	step("decr", n, err)
	n, err = c.Decrement(k("n"), 100)
	step("decr below zero", n, err)
	n, err = c.Increment(k("n"), 1<<40)
	step("incr large", n, err)
	n, err = c.Increment(k("nope"), 1)
	step("incr miss", n, err)
	c.Set(&memcache.Item{Key: k("w"), Value: []byte("18446744073709551615")})
	n, err = c.Increment(k("w"), 2)
	step("incr wraps", n, err)
	c.Set(&memcache.Item{Key: k("s"), Value: []byte("text")})
	n, err = c.Increment(k("s"), 1)
	step("incr non-numeric", n, err)

	// touch and expiry
	c.Set(&memcache.Item{Key: k("t"), Value: []byte("v")})
	step("touch", nil, c.Touch(k("t"), 2))
	step("touch miss", nil, c.Touch(k("nope"), 1))
	step("set expiring", nil, c.Set(&memcache.Item{Key: k("e"), Value: []byte("v"), Expiration: 2}))
	it, err = c.Get(k("e"))
	step("get before expiry", item(it), err)
	// memcached's clock ticks once a second: a 2 s item lives 1 to 2 s, gone after 3.5 s
	time.Sleep(3500 * time.Millisecond)
	it, err = c.Get(k("e"))
	step("get after expiry", item(it), err)
	it, err = c.Get(k("t"))
	step("get touched after expiry", item(it), err)

	// values and flags
	for _, f := range []uint32{0, 1, 4294967295} {
		c.Set(&memcache.Item{Key: k("f"), Value: []byte("v"), Flags: f})
		it, err = c.Get(k("f"))
		step(fmt.Sprintf("flags %d", f), item(it), err)
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	c.Set(&memcache.Item{Key: k("bin"), Value: all})
	it, err = c.Get(k("bin"))
	step("every byte value", it != nil && bytes.Equal(it.Value, all), err)
	c.Set(&memcache.Item{Key: k("empty"), Value: []byte{}})
	it, err = c.Get(k("empty"))
	step("empty value", item(it), err)
	big := bytes.Repeat([]byte("0123456789"), 100000)
	step("set 1 MB", nil, c.Set(&memcache.Item{Key: k("big"), Value: big}))
	it, err = c.Get(k("big"))
	step("get 1 MB", it != nil && bytes.Equal(it.Value, big), err)
	step("set over the limit", nil, c.Set(&memcache.Item{Key: k("big"), Value: make([]byte, 1024*1024+1)}))
	it, err = c.Get(k("big"))
	step("old value removed", item(it), err)

	// keys
	long := k(strings.Repeat("k", 250-len(p)))
	step("250-byte key", nil, c.Set(&memcache.Item{Key: long, Value: []byte("v")}))
	it, err = c.Get(long)
	step("get 250-byte key", item(it), err)
	step("251-byte key", nil, c.Set(&memcache.Item{Key: long + "k", Value: []byte("v")}))
	step("key with a space", nil, c.Set(&memcache.Item{Key: k("a b"), Value: []byte("v")}))

	// 50 goroutines: each its own keys, verified through GetMulti, and one shared counter
	c.Set(&memcache.Item{Key: k("ctr"), Value: []byte("0")})
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for r := 0; r < 20; r++ {
				mine := []string{k(fmt.Sprintf("g%d-a", g)), k(fmt.Sprintf("g%d-b", g))}
				want := fmt.Sprintf("%d-%d", g, r)
				for _, key := range mine {
					if c.Set(&memcache.Item{Key: key, Value: []byte(want)}) != nil {
						mu.Lock()
						bad++
						mu.Unlock()
					}
				}
				got, err := c.GetMulti(mine)
				if _, ierr := c.Increment(k("ctr"), 1); ierr != nil {
					err = ierr
				}
				if err != nil || len(got) != 2 || string(got[mine[0]].Value) != want || string(got[mine[1]].Value) != want {
					mu.Lock()
					bad++
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	it, err = c.Get(k("ctr"))
	step("concurrent", map[string]interface{}{"bad": bad, "counter": item(it)}, err)
}
