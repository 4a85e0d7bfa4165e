package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/secretbox"
	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Rotated counts what RotateKeys sealed again under the new master key.
type Rotated struct {
	DataKeys     int `json:"data_keys"`
	Endpoints    int `json:"endpoints"`
	EndpointAuth int `json:"endpoint_auth"`
}

// maxRotatePasses bounds RotateKeys's passes: a row changed by Sluice
// between its read and its update is left to the next pass.
const maxRotatePasses = 5

// RotateKeys seals again under to everything sealed by the master key
// (SLUICE_ENCRYPTION_KEY), having opened it with from (which holds the
// old key, and may hold to's): every tenant's data key, re-wrapped in
// place (nothing sealed with it is rewritten), and every endpoint's
// sealed secrets. It runs while Sluice serves: every process must already
// open with both keys (docs/encryption.md); each row is written only if
// it is still as it was read, and a row something else changed meanwhile
// is read again on the next pass. What to's key already seals is left
// alone, so running it again after it finished changes nothing.
func RotateKeys(ctx context.Context, st *store.Store, from, to *secretbox.Box) (Rotated, error) {
	var total Rotated
	for range maxRotatePasses {
		n, lost, err := rotatePass(ctx, st, from, to)
		total.DataKeys += n.DataKeys
		total.Endpoints += n.Endpoints
		total.EndpointAuth += n.EndpointAuth
		if err != nil || lost == 0 {
			return total, err
		}
	}
	return total, fmt.Errorf("rotate keys: rows still changing after %d passes: run it again", maxRotatePasses)
}

// rotatePass is one pass of RotateKeys; lost counts the rows that changed
// between their read and their update.
func rotatePass(ctx context.Context, st *store.Store, from, to *secretbox.Box) (Rotated, int, error) {
	var (
		n     Rotated
		lost  int
		keys  []dbq.ListDataKeysRow
		eps   []dbq.ListSealedEndpointSecretsRow
		auths []dbq.ListSealedAuthSecretsRow
	)
	err := st.InTx(ctx, func(tx store.Tx) error {
		var err error
		if keys, err = tx.Q.ListDataKeys(ctx); err != nil {
			return fmt.Errorf("list data keys: %w", err)
		}
		if eps, err = tx.Q.ListSealedEndpointSecrets(ctx); err != nil {
			return fmt.Errorf("list endpoint secrets: %w", err)
		}
		if auths, err = tx.Q.ListSealedAuthSecrets(ctx); err != nil {
			return fmt.Errorf("list endpoint auth secrets: %w", err)
		}
		return nil
	})
	if err != nil {
		return n, 0, fmt.Errorf("rotate keys: %w", err)
	}
	// changed counts one row's update: done, or lost to a concurrent change.
	changed := func(err error, count *int) error {
		switch {
		case errors.Is(err, sluice.ErrNotFound):
			lost++
		case err != nil:
			return err
		default:
			*count++
		}
		return nil
	}
	for _, k := range keys {
		wrapped, done, err := secretbox.Rewrap(from, to, k.TenantID, k.Wrapped)
		if err != nil {
			return n, 0, fmt.Errorf("rotate keys: data key %d of tenant %s: %w", k.Version, k.TenantID, err)
		}
		if done {
			continue
		}
		err = store.ExecRows(ctx, st, (*dbq.Queries).RewrapDataKey, dbq.RewrapDataKeyParams{
			NewWrapped: wrapped, TenantID: k.TenantID, Version: k.Version, OldWrapped: k.Wrapped,
		})
		if err := changed(err, &n.DataKeys); err != nil {
			return n, 0, fmt.Errorf("rotate keys: re-wrap data key of tenant %s: %w", k.TenantID, err)
		}
	}
	for _, e := range eps {
		p := dbq.ResealEndpointSecretsParams{
			ID: e.ID, OldSecret: e.SecretEnc, OldPreviousSecret: e.PreviousSecretEnc, OldSignKey: e.SignKeyEnc,
			OldPreviousSignKey: e.PreviousSignKeyEnc, OldTlsKey: e.TlsKeyEnc, OldDestinationUrl: e.DestinationUrlEnc,
		}
		all, err := resealAll(from, to, []*[]byte{&p.NewSecret, &p.NewPreviousSecret, &p.NewSignKey,
			&p.NewPreviousSignKey, &p.NewTlsKey, &p.NewDestinationUrl},
			e.SecretEnc, e.PreviousSecretEnc, e.SignKeyEnc, e.PreviousSignKeyEnc, e.TlsKeyEnc, e.DestinationUrlEnc)
		if err != nil {
			return n, 0, fmt.Errorf("rotate keys: endpoint %s: %w", e.ID, err)
		}
		if all {
			continue
		}
		if err := changed(store.ExecRows(ctx, st, (*dbq.Queries).ResealEndpointSecrets, p), &n.Endpoints); err != nil {
			return n, 0, fmt.Errorf("rotate keys: reseal endpoint %s: %w", e.ID, err)
		}
	}
	for _, a := range auths {
		p := dbq.ResealAuthSecretsParams{EndpointID: a.EndpointID, OldSecret: a.SecretEnc, OldToken: a.TokenEnc}
		all, err := resealAll(from, to, []*[]byte{&p.NewSecret, &p.NewToken}, a.SecretEnc, a.TokenEnc)
		if err != nil {
			return n, 0, fmt.Errorf("rotate keys: auth of endpoint %s: %w", a.EndpointID, err)
		}
		if all {
			continue
		}
		if err := changed(store.ExecRows(ctx, st, (*dbq.Queries).ResealAuthSecrets, p), &n.EndpointAuth); err != nil {
			return n, 0, fmt.Errorf("rotate keys: reseal auth of endpoint %s: %w", a.EndpointID, err)
		}
	}
	return n, lost, nil
}

// resealAll reseals each of sealed into the matching out, and reports
// whether to's key sealed every one already.
func resealAll(from, to *secretbox.Box, out []*[]byte, sealed ...[]byte) (bool, error) {
	all := true
	for i, s := range sealed {
		resealed, done, err := secretbox.Reseal(from, to, s)
		if err != nil {
			return false, err
		}
		*out[i], all = resealed, all && done
	}
	return all, nil
}
