package filter_test

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/filter"
)

func Example() {
	f, err := filter.Parse([]byte(`{"customer.tier": {"$in": ["gold", "platinum"]}, "total": {"$gte": 100}}`))
	if err != nil {
		panic(err)
	}
	for _, payload := range []string{
		`{"customer": {"tier": "gold"}, "total": 120.0}`,
		`{"customer": {"tier": "gold"}, "total": "120"}`,
		`{"customer": {"tier": "silver"}, "total": 500}`,
	} {
		ok, _ := f.Match([]byte(payload))
		fmt.Println(ok, payload)
	}

	_, err = filter.Parse([]byte(`{"$or": [{"a": 1}, {"total": {"$gt": true}}]}`))
	fmt.Println(err)
	// Output:
	// true {"customer": {"tier": "gold"}, "total": 120.0}
	// false {"customer": {"tier": "gold"}, "total": "120"}
	// false {"customer": {"tier": "silver"}, "total": 500}
	// filter: $or[1].total.$gt: takes a number or a string, not a boolean
}
