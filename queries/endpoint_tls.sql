-- name: SetEndpointTLSKey :execrows
-- The endpoint's sealed client key; null with its tls option gone.
UPDATE endpoints SET tls_key_enc = sqlc.narg(tls_key_enc), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;

-- name: EndpointTLSKey :one
SELECT tls_key_enc FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: NoticeCertificatesExpiring :many
-- Marks up to max_rows endpoints whose client certificate expires before
-- @before, and whose owner was not told of that certificate yet, as told
-- (tls_expiry_noticed is its not_after), returning what the event says.
-- Only the endpoints with a key are read (endpoints_tls_idx).
WITH due AS (
    SELECT d.id, (d.options->'tls'->>'not_after')::timestamptz AS not_after
    FROM endpoints d
    WHERE d.tls_key_enc IS NOT NULL
      AND (d.options->'tls'->>'not_after')::timestamptz < @before::timestamptz
      AND d.tls_expiry_noticed IS DISTINCT FROM (d.options->'tls'->>'not_after')::timestamptz
    ORDER BY d.id
    LIMIT @max_rows
)
UPDATE endpoints e SET tls_expiry_noticed = due.not_after
FROM due
WHERE e.id = due.id AND e.tls_expiry_noticed IS DISTINCT FROM due.not_after
RETURNING e.id, e.tenant_id, e.url, e.consumer,
    coalesce(e.options->'tls'->>'client_certificate_subject', '')::text AS subject, due.not_after::timestamptz AS not_after;
