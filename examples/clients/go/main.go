// Produces one InboundMessage to agentstream's `inbound` topic and follows the answer on `events`
// through a consumer group of its own, with franz-go (docs/clients.md, docs/producing.md).
//
// Settings come from the environment: BOOTSTRAP_SERVERS (default localhost:9092), TOPIC_PREFIX
// (agentstream.), GROUP_ID (agentstream-example-go), PLATFORM (console), CHAT_ID (local),
// USER_ID (alice), TEXT (calculate 6*7), TIMEOUT_S (120).
// stdout: the final answer. stderr: each followed event. Exit 0 when the run completed, 1 when it
// ended otherwise, 2 on timeout or a Kafka error.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go client: "+format+"\n", args...)
	os.Exit(code)
}

func uuid4() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

type user struct {
	ID string `json:"id"`
}

// The fields docs/producing.md requires; `type` is optional and says what the record is.
type inboundMessage struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Platform string `json:"platform"`
	ChatID   string `json:"chat_id"`
	User     user   `json:"user"`
	Text     string `json:"text"`
}

// The fields of an `events` record this client reads (docs/topics.md § events).
type runEvent struct {
	Type      string `json:"type"`
	RunID     string `json:"run_id"`
	RootRunID string `json:"root_run_id"`
	Seq       int64  `json:"seq"`
	InboundID string `json:"inbound_id"`
	Status    string `json:"status"`
	Text      string `json:"text"`
	Error     string `json:"error"`
}

func main() {
	bootstrap := env("BOOTSTRAP_SERVERS", "localhost:9092")
	prefix := env("TOPIC_PREFIX", "agentstream.")
	timeoutS, err := strconv.ParseFloat(env("TIMEOUT_S", "120"), 64)
	if err != nil {
		fail(2, "TIMEOUT_S: %v", err)
	}
	message := inboundMessage{
		Type:     "inbound.message",
		ID:       uuid4(),
		Platform: env("PLATFORM", "console"),
		ChatID:   env("CHAT_ID", "local"),
		User:     user{ID: env("USER_ID", "alice")},
		Text:     env("TEXT", "calculate 6*7"),
	}
	key := message.Platform + ":" + message.ChatID // the conversation key (docs/producing.md § The key)
	value, _ := json.Marshal(message)

	// franz-go names the cluster it expects in ApiVersions v5 (KIP-1242), which the embedded broker
	// answers by closing the connection (docs/clients.md): ask with v4, which names none.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(18, 4) // 18: ApiVersions

	client, err := kgo.NewClient(
		kgo.MaxVersions(versions),
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		// A group of its own; a new group starts at the beginning, so nothing of the answer is
		// missed however long the join takes; an existing group resumes where it committed.
		kgo.ConsumerGroup(env("GROUP_ID", "agentstream-example-go")),
		kgo.ConsumeTopics(prefix+"events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// The embedded broker answers a fetch only when its wait expires (docs/clients.md).
		kgo.FetchMaxWait(10*time.Millisecond),
		// franz-go's default partitioner hashes keys with murmur2, as Kafka's Java client does.
	)
	if err != nil {
		fail(2, "%v", err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeoutS*float64(time.Second)))
	defer cancel()
	produced, err := client.ProduceSync(ctx, &kgo.Record{Topic: prefix + "inbound", Key: []byte(key), Value: value}).First()
	if err != nil {
		fail(2, "producing to %sinbound: %v", prefix, err)
	}
	fmt.Fprintf(os.Stderr, "produced %s partition=%d offset=%d key=%s id=%s\n", produced.Topic, produced.Partition, produced.Offset, key, message.ID)

	root := ""
	for {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			fail(2, "timed out after %gs waiting for the answer to %s (root run %q)", timeoutS, message.ID, root)
		}
		var fetchErr error
		fetches.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fetchErr = fmt.Errorf("%s[%d]: %w", topic, partition, err)
			}
		})
		if fetchErr != nil {
			fail(2, "consuming: %v", fetchErr)
		}
		for iter := fetches.RecordIter(); !iter.Done(); {
			var event runEvent
			if err := json.Unmarshal(iter.Next().Value, &event); err != nil {
				continue // not ours to judge: agentstream's own consumers send bad records to dlq
			}
			if root == "" && event.Type == "run.queued" && event.InboundID == message.ID {
				root = event.RootRunID
			}
			if root == "" || event.RootRunID != root {
				continue
			}
			fmt.Fprintf(os.Stderr, "event seq=%d type=%s\n", event.Seq, event.Type)
			if event.Type == "run.finished" && event.RunID == root {
				if err := client.CommitUncommittedOffsets(ctx); err != nil {
					fail(2, "committing the group's offsets: %v", err)
				}
				if event.Status != "completed" {
					fail(1, "the run ended %s: %s", event.Status, event.Error)
				}
				fmt.Println(event.Text)
				return
			}
		}
	}
}
