// go-ref: the reference load client for benches/vs-go.sh, written against the official
// Go NATS client (nats.go) with the same workloads and semantics as `diskpulse load`.
//
//	go-ref -mode js-pub-async|js-pub-sync|pub|pubsub|kv-put|setup|reset [flags]
//
// Each client is its own connection; --msgs is split over the clients like diskpulse does.
// All clients connect (and the stream/bucket is checked or created) before the clock
// starts. Prints one JSON line: msgs (successful ops), errors, seconds (first op to last
// completion over all clients), msgs_per_s, and latency p50/p99 in microseconds where the
// mode has one (from the moment the op was started to its ack).
//
// Payloads carry a 16-byte send-time stamp like diskpulse's (-stamp=false: a fixed payload).
//
// Modes:
//
//	js-pub-async  PublishAsync with nats.PublishAsyncMaxPending(window): a sliding window of
//	              acks in flight. -lat (default) also waits each ack future in order, to
//	              time it and count errors the way diskpulse does; -lat=false uses only the
//	              error callback and PublishAsyncComplete (the leanest nats.go path).
//	js-pub-sync   js.Publish: each ack awaited before the next publish.
//	pub           nc.Publish in a loop, then nc.Flush (a PING/PONG round trip); seconds
//	              include the flush, publish_seconds do not.
//	pubsub        -clients publishers as in pub, and -subs subscribers (own connections,
//	              subscribed and flushed before the clock starts) that each expect every
//	              message, as `nats bench --pub N --sub M` does: nc.Subscribe with a
//	              callback and unlimited pending limits (natscli's SetPendingLimits(-1, -1)).
//	              msgs = messages delivered (all subscribers), errors = messages a
//	              subscriber never got (waited for until 1 s without any after the
//	              publishers' flush), msgs_per_s = delivered / (first to last receipt over
//	              all subscribers, diskpulse's sub rate), pub_msgs_per_s = the publishers'
//	              own; lat = end to end from the stamp; slow_consumers = the client's
//	              ErrSlowConsumer reports.
//	kv-put        kv.Put in a loop; key = "k<i mod keys>".
//	setup         create the stream (-stream/-subject) and KV bucket (-bucket) if missing.
//	reset         delete the stream and the KV bucket (missing ones are fine).
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

type result struct {
	Client     string   `json:"client"`
	NatsGo     string   `json:"nats_go"`
	Go         string   `json:"go"`
	Mode       string   `json:"mode"`
	Clients    int      `json:"clients"`
	Size       int      `json:"size"`
	Window     int      `json:"window,omitempty"`
	Msgs       int64    `json:"msgs"`
	Errors     int64    `json:"errors"`
	Seconds    float64  `json:"seconds"`
	MsgsPerS   float64  `json:"msgs_per_s"`
	PubSeconds *float64 `json:"publish_seconds,omitempty"`
	LatP50us   *float64 `json:"lat_p50_us,omitempty"`
	LatP99us   *float64 `json:"lat_p99_us,omitempty"`
	FirstError string   `json:"first_error,omitempty"`
	// pubsub
	Subs          int      `json:"subs,omitempty"`
	Expected      int64    `json:"expected,omitempty"`
	Missing       *int64   `json:"missing,omitempty"`
	PubMsgsPerS   *float64 `json:"pub_msgs_per_s,omitempty"`
	SlowConsumers *int64   `json:"slow_consumers,omitempty"`
}

// One client's outcome.
type outcome struct {
	ok, errs    int64
	first, last time.Time // first op started, last op completed
	pubEnd      time.Time // pub: last Publish returned (before Flush)
	lat         []int64   // ns
	firstErr    string
}

var (
	mode    = flag.String("mode", "js-pub-async", "js-pub-async|js-pub-sync|pub|pubsub|kv-put|setup|reset")
	subs    = flag.Int("subs", 4, "pubsub: subscribers, each receives every message")
	url     = flag.String("url", nats.DefaultURL, "server URL")
	msgs    = flag.Int64("msgs", 100000, "total operations, split over the clients")
	size    = flag.Int("size", 128, "payload bytes")
	window  = flag.Int("window", 256, "js-pub-async: acks in flight per client")
	clients = flag.Int("clients", 1, "connections")
	stream  = flag.String("stream", "DISKPULSE", "stream name")
	subject = flag.String("subject", "diskpulse.bench", "subject")
	bucket  = flag.String("bucket", "diskpulse", "KV bucket")
	keys    = flag.Int64("keys", 1000, "kv-put: distinct keys")
	lat     = flag.Bool("lat", true, "js-pub-async: time every ack (as diskpulse does)")
	stamp   = flag.Bool("stamp", true, "stamp payloads with the send time (as diskpulse does)")
	timeout = flag.Duration("timeout", 30*time.Second, "JetStream request/ack timeout (diskpulse: 30 s)")
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-ref: "+f+"\n", a...)
	os.Exit(1)
}

var slowConsumers int64

func connect(name string) *nats.Conn {
	nc, err := nats.Connect(*url, nats.Name(name), nats.MaxReconnects(60),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrSlowConsumer) {
				atomic.AddInt64(&slowConsumers, 1)
			}
		}))
	if err != nil {
		die("connect %s: %v", *url, err)
	}
	return nc
}

func ensureStream(js nats.JetStreamContext) {
	_, err := js.StreamInfo(*stream)
	if errors.Is(err, nats.ErrStreamNotFound) {
		_, err = js.AddStream(&nats.StreamConfig{Name: *stream, Subjects: []string{*subject},
			Storage: nats.FileStorage, Replicas: 1})
	}
	if err != nil {
		die("stream %s: %v", *stream, err)
	}
}

func ensureBucket(js nats.JetStreamContext) nats.KeyValue {
	kv, err := js.KeyValue(*bucket)
	if errors.Is(err, nats.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(&nats.KeyValueConfig{Bucket: *bucket, Storage: nats.FileStorage})
	}
	if err != nil {
		die("bucket %s: %v", *bucket, err)
	}
	return kv
}

// share: how many of total client i of n does (diskpulse's split).
func share(total int64, i, n int) int64 {
	r := total / int64(n)
	if int64(i) < total%int64(n) {
		r++
	}
	return r
}

type payload struct{ buf []byte }

func newPayload() *payload { return &payload{buf: bytes(*size)} }

func bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// next stamps the (reused) payload: nats.go copies it into its write buffer on publish.
func (p *payload) next() []byte {
	if *stamp && len(p.buf) >= 16 {
		binary.LittleEndian.PutUint64(p.buf[0:8], uint64(time.Now().UnixNano()))
		copy(p.buf[8:16], "dpstamp1")
	}
	return p.buf
}

func (o *outcome) fail(err error) {
	o.errs++
	if o.firstErr == "" {
		o.firstErr = err.Error()
	}
}

func runJsAsync(nc *nats.Conn, n int64, o *outcome) {
	var cbErrs int64
	var cbFirst atomic.Value
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(*window), nats.MaxWait(*timeout),
		nats.PublishAsyncErrHandler(func(_ nats.JetStream, _ *nats.Msg, err error) {
			atomic.AddInt64(&cbErrs, 1)
			cbFirst.CompareAndSwap(nil, err.Error())
		}))
	if err != nil {
		die("jetstream: %v", err)
	}
	p := newPayload()
	type inflight struct {
		f    nats.PubAckFuture
		sent time.Time
	}
	var ch chan inflight
	var done chan struct{}
	if *lat {
		// Waits each ack in publish order (JetStream acks one stream's publishes in order).
		ch = make(chan inflight, *window)
		done = make(chan struct{})
		o.lat = make([]int64, 0, n)
		go func() {
			defer close(done)
			for it := range ch {
				select {
				case <-it.f.Ok():
					now := time.Now()
					o.ok++
					o.lat = append(o.lat, int64(now.Sub(it.sent)))
					o.last = now
				case <-it.f.Err():
					o.last = time.Now()
				}
			}
		}()
	}
	o.first = time.Now()
	var pubErrs int64
	for i := int64(0); i < n; i++ {
		sent := time.Now()
		f, err := js.PublishAsync(*subject, p.next())
		for err != nil && err.Error() == "nats: stalled with too many outstanding async published messages" {
			// nats.go gives up waiting for a window slot after 200 ms: wait on.
			f, err = js.PublishAsync(*subject, p.buf)
		}
		if err != nil {
			pubErrs++
			o.fail(err)
			continue
		}
		if *lat {
			ch <- inflight{f, sent}
		}
	}
	if *lat {
		close(ch)
		<-done
	} else {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(*timeout):
			o.fail(fmt.Errorf("acks still pending after %v", *timeout))
		}
		o.last = time.Now()
		o.ok = n - pubErrs - atomic.LoadInt64(&cbErrs)
	}
	o.errs += atomic.LoadInt64(&cbErrs)
	if s, _ := cbFirst.Load().(string); s != "" && o.firstErr == "" {
		o.firstErr = s
	}
}

func runJsSync(nc *nats.Conn, n int64, o *outcome) {
	js, err := nc.JetStream(nats.MaxWait(*timeout))
	if err != nil {
		die("jetstream: %v", err)
	}
	p := newPayload()
	o.lat = make([]int64, 0, n)
	o.first = time.Now()
	for i := int64(0); i < n; i++ {
		sent := time.Now()
		_, err := js.Publish(*subject, p.next())
		now := time.Now()
		if err != nil {
			o.fail(err)
		} else {
			o.ok++
			o.lat = append(o.lat, int64(now.Sub(sent)))
		}
		o.last = now
	}
}

func runPub(nc *nats.Conn, n int64, o *outcome) {
	p := newPayload()
	o.first = time.Now()
	for i := int64(0); i < n; i++ {
		if err := nc.Publish(*subject, p.next()); err != nil {
			o.fail(err)
		} else {
			o.ok++
		}
	}
	o.pubEnd = time.Now()
	if err := nc.FlushTimeout(*timeout); err != nil {
		o.fail(err)
	}
	o.last = time.Now()
}

func runKvPut(nc *nats.Conn, n int64, idx int64, o *outcome) {
	js, err := nc.JetStream(nats.MaxWait(*timeout))
	if err != nil {
		die("jetstream: %v", err)
	}
	kv, err := js.KeyValue(*bucket)
	if err != nil {
		die("bucket %s: %v", *bucket, err)
	}
	p := newPayload()
	o.lat = make([]int64, 0, n)
	key := make([]byte, 0, 24)
	o.first = time.Now()
	for i := int64(0); i < n; i++ {
		key = strconv.AppendInt(append(key[:0], 'k'), (idx+i)%*keys, 10)
		sent := time.Now()
		_, err := kv.Put(string(key), p.next())
		now := time.Now()
		if err != nil {
			o.fail(err)
		} else {
			o.ok++
			o.lat = append(o.lat, int64(now.Sub(sent)))
		}
		o.last = now
	}
}

func pct(s []int64, q float64) *float64 {
	if len(s) == 0 {
		return nil
	}
	i := int(q*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	v := float64(s[i]) / 1e3
	return &v
}

func main() {
	flag.Parse()
	if *clients < 1 || *msgs < 1 || *window < 1 || *size < 0 || *keys < 1 {
		die("bad flags")
	}
	switch *mode {
	case "setup", "reset":
		nc := connect("go-ref-setup")
		defer nc.Close()
		js, err := nc.JetStream(nats.MaxWait(*timeout))
		if err != nil {
			die("jetstream: %v", err)
		}
		if *mode == "reset" {
			if err := js.DeleteStream(*stream); err != nil && !errors.Is(err, nats.ErrStreamNotFound) {
				die("delete stream %s: %v", *stream, err)
			}
			if err := js.DeleteKeyValue(*bucket); err != nil && !errors.Is(err, nats.ErrBucketNotFound) && !errors.Is(err, nats.ErrStreamNotFound) {
				die("delete bucket %s: %v", *bucket, err)
			}
		} else {
			ensureStream(js)
			ensureBucket(js)
		}
		return
	case "pubsub":
		runPubSub()
		return
	case "js-pub-async", "js-pub-sync", "pub", "kv-put":
	default:
		die("unknown -mode %q", *mode)
	}

	// Connect every client (and check what the mode needs) before the clock starts.
	setup := connect("go-ref-setup")
	if *mode != "pub" {
		js, err := setup.JetStream(nats.MaxWait(*timeout))
		if err != nil {
			die("jetstream: %v", err)
		}
		if *mode == "kv-put" {
			ensureBucket(js)
		} else {
			ensureStream(js)
		}
	}
	conns := make([]*nats.Conn, *clients)
	for i := range conns {
		conns[i] = connect(fmt.Sprintf("go-ref-%s-%d", *mode, i))
	}
	outs := make([]outcome, *clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	var base int64
	for i := range conns {
		n := share(*msgs, i, *clients)
		idx := base
		base += n
		wg.Add(1)
		go func(i int, n, idx int64) {
			defer wg.Done()
			<-start
			o := &outs[i]
			switch *mode {
			case "js-pub-async":
				runJsAsync(conns[i], n, o)
			case "js-pub-sync":
				runJsSync(conns[i], n, o)
			case "pub":
				runPub(conns[i], n, o)
			case "kv-put":
				runKvPut(conns[i], n, idx, o)
			}
		}(i, n, idx)
	}
	close(start)
	wg.Wait()

	r := result{Client: "nats.go", NatsGo: nats.Version, Go: runtime.Version(), Mode: *mode,
		Clients: *clients, Size: *size}
	if *mode == "js-pub-async" {
		r.Window = *window
	}
	var first, last, pubEnd time.Time
	var all []int64
	for i := range outs {
		o := &outs[i]
		r.Msgs += o.ok
		r.Errors += o.errs
		if r.FirstError == "" {
			r.FirstError = o.firstErr
		}
		if first.IsZero() || o.first.Before(first) {
			first = o.first
		}
		if o.last.After(last) {
			last = o.last
		}
		if o.pubEnd.After(pubEnd) {
			pubEnd = o.pubEnd
		}
		all = append(all, o.lat...)
	}
	r.Seconds = last.Sub(first).Seconds()
	if r.Seconds > 0 {
		r.MsgsPerS = float64(r.Msgs) / r.Seconds
	}
	if *mode == "pub" {
		s := pubEnd.Sub(first).Seconds()
		r.PubSeconds = &s
	}
	if len(all) > 0 {
		sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
		r.LatP50us, r.LatP99us = pct(all, 0.50), pct(all, 0.99)
	}
	for _, c := range conns {
		c.Close()
	}
	setup.Close()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		die("%v", err)
	}
	if r.Errors > 0 {
		os.Exit(3)
	}
}

// One subscriber of pubsub: counts what it gets, times it end to end from the stamp
// (send time at bytes 0..8, see payload.next).
type subscriber struct {
	mu          sync.Mutex
	got         int64
	first, last time.Time
	lat         []int64
	done        chan struct{}
	want        int64
}

func (s *subscriber) handle(m *nats.Msg) {
	now := time.Now()
	s.mu.Lock()
	if s.got == 0 {
		s.first = now
	}
	s.got++
	s.last = now
	if *stamp && len(m.Data) >= 16 && string(m.Data[8:16]) == "dpstamp1" {
		sent := int64(binary.LittleEndian.Uint64(m.Data[0:8]))
		s.lat = append(s.lat, now.UnixNano()-sent)
	}
	if s.got == s.want {
		close(s.done)
	}
	s.mu.Unlock()
}

func (s *subscriber) count() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func runPubSub() {
	if *subs < 1 {
		die("bad flags: -subs must be at least 1")
	}
	ss := make([]*subscriber, *subs)
	subConns := make([]*nats.Conn, *subs)
	for i := range ss {
		ss[i] = &subscriber{done: make(chan struct{}), want: *msgs, lat: make([]int64, 0, *msgs)}
		nc := connect(fmt.Sprintf("go-ref-sub-%d", i))
		sub, err := nc.Subscribe(*subject, ss[i].handle)
		if err != nil {
			die("subscribe: %v", err)
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			die("pending limits: %v", err)
		}
		if err := nc.Flush(); err != nil {
			die("flush: %v", err)
		}
		subConns[i] = nc
	}
	conns := make([]*nats.Conn, *clients)
	for i := range conns {
		conns[i] = connect(fmt.Sprintf("go-ref-pub-%d", i))
	}
	outs := make([]outcome, *clients)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range conns {
		wg.Add(1)
		go func(i int, n int64) {
			defer wg.Done()
			<-start
			runPub(conns[i], n, &outs[i])
		}(i, share(*msgs, i, *clients))
	}
	close(start)
	wg.Wait()
	// Wait for every subscriber's last message; give up after 1 s without progress.
	for {
		all := true
		for _, s := range ss {
			select {
			case <-s.done:
			default:
				all = false
			}
		}
		if all {
			break
		}
		var before int64
		for _, s := range ss {
			before += s.count()
		}
		time.Sleep(time.Second)
		var after int64
		for _, s := range ss {
			after += s.count()
		}
		if after == before {
			break
		}
	}
	for _, c := range subConns {
		c.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	r := result{Client: "nats.go", NatsGo: nats.Version, Go: runtime.Version(), Mode: *mode,
		Clients: *clients, Size: *size, Subs: *subs, Expected: *msgs * int64(*subs)}
	var pubFirst, pubLast time.Time
	var published int64
	for i := range outs {
		o := &outs[i]
		published += o.ok
		r.Errors += o.errs
		if r.FirstError == "" {
			r.FirstError = o.firstErr
		}
		if pubFirst.IsZero() || o.first.Before(pubFirst) {
			pubFirst = o.first
		}
		if o.last.After(pubLast) {
			pubLast = o.last
		}
	}
	if d := pubLast.Sub(pubFirst).Seconds(); d > 0 {
		v := float64(published) / d
		r.PubMsgsPerS = &v
	}
	var first, last time.Time
	var all []int64
	for _, s := range ss {
		s.mu.Lock()
		r.Msgs += s.got
		if s.got > 0 && (first.IsZero() || s.first.Before(first)) {
			first = s.first
		}
		if s.last.After(last) {
			last = s.last
		}
		all = append(all, s.lat...)
		s.mu.Unlock()
	}
	missing := r.Expected - r.Msgs
	r.Missing = &missing
	r.Errors += missing
	sc := atomic.LoadInt64(&slowConsumers)
	r.SlowConsumers = &sc
	r.Seconds = last.Sub(first).Seconds()
	if r.Seconds > 0 {
		r.MsgsPerS = float64(r.Msgs) / r.Seconds
	}
	if len(all) > 0 {
		sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
		r.LatP50us, r.LatP99us = pct(all, 0.50), pct(all, 0.99)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		die("%v", err)
	}
	if r.Errors > 0 {
		os.Exit(3)
	}
}
