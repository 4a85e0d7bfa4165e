package store

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConfigurePool makes every connection of a pool encode uuid.UUID values
// natively (16 binary bytes) instead of through their driver.Valuer, which
// formats each as a string for Postgres to parse back: in the bulk queries
// of fan-out and dispatch, arrays of thousands of ids, that was a tenth of
// the process's CPU.
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		tm := conn.TypeMap()
		tm.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapUUIDEncodePlan}, tm.TryWrapEncodePlanFuncs...)
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// nativeUUID is a uuid.UUID that pgtype's UUID codec encodes directly.
type nativeUUID uuid.UUID

// UUIDValue implements pgtype.UUIDValuer.
func (u nativeUUID) UUIDValue() (pgtype.UUID, error) {
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

func wrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &wrapUUIDPlan{}, nativeUUID(u), true
	}
	return nil, nil, false
}

type wrapUUIDPlan struct{ next pgtype.EncodePlan }

func (p *wrapUUIDPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *wrapUUIDPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(nativeUUID(value.(uuid.UUID)), buf)
}
