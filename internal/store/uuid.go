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
// the process's CPU. It decodes them natively too (uuidCodec), instead of
// through their sql.Scanner: three allocations for every id read back.
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		tm := conn.TypeMap()
		tm.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapUUIDEncodePlan}, tm.TryWrapEncodePlanFuncs...)
		uuidType := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}}
		tm.RegisterType(uuidType)
		tm.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: uuidType}})
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

// uuidCodec is pgtype's UUID codec, scanning into a uuid.UUID directly:
// pgtype would find its sql.Scanner first, and decode each id to a string
// for it to parse. A NULL scans as the zero UUID, as uuid.UUID.Scan has it.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if next := c.UUIDCodec.PlanScan(m, oid, format, (*uuidScanner)(nil)); next != nil {
			return scanUUIDPlan{next: next}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type scanUUIDPlan struct{ next pgtype.ScanPlan }

func (p scanUUIDPlan) Scan(src []byte, target any) error {
	return p.next.Scan(src, (*uuidScanner)(target.(*uuid.UUID))) //nolint:wrapcheck // pgtype's own
}

// uuidScanner is a uuid.UUID as pgtype's UUID codec scans into one.
type uuidScanner uuid.UUID

// ScanUUID implements pgtype.UUIDScanner.
func (u *uuidScanner) ScanUUID(v pgtype.UUID) error {
	*u = uuidScanner{}
	if v.Valid {
		*u = v.Bytes
	}
	return nil
}
