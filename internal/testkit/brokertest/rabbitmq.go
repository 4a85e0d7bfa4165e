package brokertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	server := filepath.Join(rabbitBin, "rabbitmq-server")
	if _, err := os.Stat(server); err != nil {
		t.Skipf("rabbitmq-server is not installed (apt-get install -y rabbitmq-server): %v", err)
	}
	epmdBin := lookPath(t, "epmd", "erlang-base")
	dir := t.TempDir()
	epmd := start(t, "epmd", func(port int) *exec.Cmd {
		return exec.Command(epmdBin, "-d", "-port", strconv.Itoa(port))
	}, "epmd running", "%d", startTimeout)
	config := filepath.Join(dir, "rabbitmq.conf")
	write(t, config, strings.Join(conf, "\n")+"\n")
	plugins := filepath.Join(dir, "enabled_plugins")
	write(t, plugins, "[].\n")
	var env []string
	b := start(t, "rabbitmq", func(port int) *exec.Cmd {
		node := "sluice" + strconv.Itoa(port) + "@localhost"
		env = []string{
			"PATH=/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8",
			"ERL_EPMD_PORT=" + strconv.Itoa(epmd.Port),
			"RABBITMQ_NODENAME=" + node,
			"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"), // absent: not /etc's
		}
		c := exec.Command(server)
		c.Env = append(env,
			"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
			"RABBITMQ_NODE_PORT="+strconv.Itoa(port),
			"RABBITMQ_DIST_PORT="+strconv.Itoa(freePort(t)),
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
		return c
	}, "Server startup complete", "amqp://guest:guest@127.0.0.1:%d/", rabbitStartTimeout)
	b.env = env
	return b
}

// Ctl runs rabbitmqctl against the broker (RabbitMQ's only) and returns
// its output, failing the test if it fails:
// b.Ctl(t, "set_vm_memory_high_watermark", "0.0000001").
func (b *Broker) Ctl(t testing.TB, args ...string) string {
	t.Helper()
	if b.env == nil {
		t.Fatalf("Ctl is for RabbitMQ")
	}
	c := exec.CommandContext(t.Context(), filepath.Join(rabbitBin, "rabbitmqctl"), args...)
	c.Env = b.env
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
