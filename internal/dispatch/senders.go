package dispatch

import (
	"sync"
	"time"
)

// A batch's sends run side by side, each on a goroutine of its own. A new
// goroutine starts on a small stack, which a send (a client's calls, its
// TLS, its broker protocol) grows again, copied at every doubling: in a
// profile of a worker delivering to brokers that was a seventh of its CPU.
// senders keeps the goroutines that sent for a while after (senderIdle),
// so that the next sends run on stacks grown already.

// senderIdle is how long a send goroutine waits for another send.
const senderIdle = 2 * time.Second

// senders runs sends on goroutines it keeps while they are busy enough.
type senders struct {
	work chan func() // taken by an idle goroutine
	done chan struct{}
	once sync.Once
}

func newSenders() *senders {
	return &senders{work: make(chan func()), done: make(chan struct{})}
}

// run calls send on a goroutine, an idle one if any is waiting; wg is done
// once send returns.
func (s *senders) run(wg *sync.WaitGroup, send func()) {
	wg.Add(1)
	task := func() {
		defer wg.Done()
		send()
	}
	select {
	case s.work <- task:
	default:
		go s.loop(task)
	}
}

// loop runs task, then the tasks it is handed, until none comes for
// senderIdle or the senders close.
func (s *senders) loop(task func()) {
	idle := time.NewTimer(senderIdle)
	defer idle.Stop()
	for {
		task()
		task = nil // what the send held goes with it
		idle.Reset(senderIdle)
		select {
		case task = <-s.work:
		case <-idle.C:
			return
		case <-s.done:
			return
		}
	}
}

// close lets the idle goroutines go.
func (s *senders) close() { s.once.Do(func() { close(s.done) }) }
