package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
)

// WritePgBouncerConfig writes into dir the pgbouncer.ini (and its user
// list) of a PgBouncer on loopback port listening for the Postgres on
// pgPort, in transaction pooling mode, trusting user postgres, with at most
// poolSize server connections. Start it with `pgbouncer dir/pgbouncer.ini`.
func WritePgBouncerConfig(dir string, pgPort, port, poolSize int) error {
	users := filepath.Join(dir, "userlist.txt")
	ini := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = %d
max_db_connections = %d
server_lifetime = 3600
`, pgPort, port, users, poolSize, poolSize)
	if err := os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return fmt.Errorf("write pgbouncer userlist: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return fmt.Errorf("write pgbouncer.ini: %w", err)
	}
	return nil
}
