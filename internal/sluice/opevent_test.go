package sluice

import "testing"

func TestIsReservedTypeIgnoresCase(t *testing.T) {
	t.Parallel()
	for typ, want := range map[string]bool{
		"sluice.endpoint.disabled": true,
		"Sluice.endpoint.disabled": true,
		"SLUICE.test":              true,
		"ſluice.test":              true, // a long s folds to s
		"sLuIcE.":                  true,
		"sluice":                   false,
		"sluicer.x":                false,
		"order.sluice.created":     false,
		"":                         false,
		"slu":                      false,
	} {
		if got := IsReservedType(typ); got != want {
			t.Errorf("IsReservedType(%q) = %v, want %v", typ, got, want)
		}
	}
}
