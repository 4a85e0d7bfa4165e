package batch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/internal/batch"
)

// errEmpty stands for a database refusing one row.
var errEmpty = errors.New("empty name")

// A Batcher whose commit stores names all or nothing: the empty name is
// refused, and Isolate lets the batcher split its group so that only the
// empty name fails.
func Example() {
	commit := func(_ context.Context, names []string) ([]string, error) {
		for _, n := range names {
			if n == "" {
				return nil, errEmpty
			}
		}
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = strings.ToUpper(n)
		}
		return out, nil
	}
	b := batch.New(batch.Config{Isolate: func(err error) bool { return errors.Is(err, errEmpty) }}, commit)
	defer b.Close()

	for _, name := range []string{"ada", "", "grace"} {
		stored, err := b.Submit(context.Background(), name)
		fmt.Printf("%q %v\n", stored, err)
	}
	// Output:
	// "ADA" <nil>
	// "" empty name
	// "GRACE" <nil>
}
