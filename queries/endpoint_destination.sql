-- name: SetEndpointDestinationURL :execrows
-- The endpoint's sealed destination URL; null with its destination gone.
UPDATE endpoints SET destination_url_enc = sqlc.narg(destination_url_enc), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id;

-- name: EndpointDestinationURL :one
SELECT destination_url_enc FROM endpoints WHERE tenant_id = @tenant_id AND id = @id;
