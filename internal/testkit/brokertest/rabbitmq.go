package brokertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitStartTimeout bounds RabbitMQ's start: its Erlang VM boots in
// seconds on an idle machine, many more on a busy one.
const rabbitStartTimeout = 120 * time.Second

// rabbitBin is where Debian's rabbitmq-server keeps its scripts; the ones
// in /usr/sbin switch to the rabbitmq user.
const rabbitBin = "/usr/lib/rabbitmq/bin"

// RabbitMQ starts rabbitmq-server as the current user on a free loopback
// port, its node, database, logs and Erlang cookie in a directory of the
// test's own and its Erlang port mapper (epmd) on a port of its own too,
// and returns it with URL amqp://guest:guest@127.0.0.1:PORT/. conf are
// extra rabbitmq.conf lines ("vm_memory_high_watermark.absolute = 1").
func RabbitMQ(t testing.TB, conf ...string) *Broker {
	t.Helper()
	b, err := StartRabbitMQ(t.TempDir(), conf...)
	return must(t, b, err)
}

// StartRabbitMQ is RabbitMQ in dir, for a program; Stop stops it.
func StartRabbitMQ(dir string, conf ...string) (*Broker, error) {
	server := filepath.Join(rabbitBin, "rabbitmq-server")
	if _, err := os.Stat(server); err != nil {
		return nil, fmt.Errorf("%w: rabbitmq-server (apt-get install -y rabbitmq-server): %w", ErrNotInstalled, err)
	}
	epmdBin, err := lookPath("epmd", "erlang-base")
	if err != nil {
		return nil, err
	}
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	epmd, err := start("epmd", func(port int) (*exec.Cmd, error) {
		return exec.Command(epmdBin, "-d", "-port", strconv.Itoa(port)), nil
	}, dir, "epmd running", "%d", startTimeout)
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "rabbitmq.conf")
	plugins := filepath.Join(dir, "enabled_plugins")
	if err := write(config, strings.Join(conf, "\n")+"\n"); err != nil {
		epmd.Stop()
		return nil, err
	}
	if err := write(plugins, "[].\n"); err != nil {
		epmd.Stop()
		return nil, err
	}
	// The node's name follows its port, so a restart on the same port is
	// the same node, with the same database and cookie.
	env := func(port int) []string {
		return []string{
			"PATH=/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8",
			"ERL_EPMD_PORT=" + strconv.Itoa(epmd.Port),
			"RABBITMQ_NODENAME=sluice" + strconv.Itoa(port) + "@localhost",
			"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"), // absent: not /etc's
		}
	}
	b, err := start("rabbitmq", func(port int) (*exec.Cmd, error) {
		dist, err := freePort()
		if err != nil {
			return nil, err
		}
		c := exec.Command(server)
		c.Env = append(env(port),
			"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
			"RABBITMQ_NODE_PORT="+strconv.Itoa(port),
			"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
			"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
			"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
			"RABBITMQ_LOGS=-",
			"RABBITMQ_CONFIG_FILE="+config,
			"RABBITMQ_ENABLED_PLUGINS_FILE="+plugins,
			"RABBITMQ_PLUGINS_EXPAND_DIR="+filepath.Join(dir, "plugins"),
			"RABBITMQ_PID_FILE="+filepath.Join(dir, "rabbitmq.pid"),
			// One scheduler that sleeps when idle: the machine is shared.
			"RABBITMQ_SCHEDULER_BUSY_WAIT_THRESHOLD=none",
			"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=+S 1:1",
		)
		return c, nil
	}, dir, "Server startup complete", "amqp://guest:guest@127.0.0.1:%d/", rabbitStartTimeout)
	if err != nil {
		epmd.Stop()
		return nil, err
	}
	b.env, b.epmd = env(b.Port), epmd
	return b, nil
}

// Channel opens a connection to the broker (RabbitMQ's only), closed when
// the test ends, and returns a channel on it.
func (b *Broker) Channel(t testing.TB) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Ctl runs rabbitmqctl against the broker (RabbitMQ's only) and returns
// its output, failing the test if it fails:
// b.Ctl(t, "set_vm_memory_high_watermark", "0.0000001").
func (b *Broker) Ctl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := b.RunCtl(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// RunCtl is Ctl for a program.
func (b *Broker) RunCtl(ctx context.Context, args ...string) (string, error) {
	if b.env == nil {
		return "", fmt.Errorf("rabbitmqctl is for RabbitMQ, not %s", b.name)
	}
	c := exec.CommandContext(ctx, filepath.Join(rabbitBin, "rabbitmqctl"), args...)
	c.Env = b.env
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("rabbitmqctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func write(path, text string) error {
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
