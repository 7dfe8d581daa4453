#!/usr/bin/env bash
# Produces one InboundMessage to agentstream's `inbound` topic and follows the answer on `events`
# through a consumer group of its own, with kcat and jq (docs/clients.md, docs/producing.md).
# Apache Kafka only: Debian bookworm's kcat (librdkafka 2.0.2) cannot read the embedded broker's
# ApiVersions answer (docs/clients.md § Known not to work with the embedded broker).
#
# Settings come from the environment: BOOTSTRAP_SERVERS (default localhost:9092), TOPIC_PREFIX
# (agentstream.), GROUP_ID (agentstream-example-kcat), PLATFORM (console), CHAT_ID (local),
# USER_ID (alice), TEXT (calculate 6*7), TIMEOUT_S (120).
# stdout: the final answer. stderr: each followed event. Exit 0 when the run completed, 1 when it
# ended otherwise, 2 on timeout or a Kafka error.
set -euo pipefail

bootstrap=${BOOTSTRAP_SERVERS:-localhost:9092}
prefix=${TOPIC_PREFIX:-agentstream.}
group=${GROUP_ID:-agentstream-example-kcat}
platform=${PLATFORM:-console}
chat_id=${CHAT_ID:-local}
timeout_s=${TIMEOUT_S:-120}
id=$(cat /proc/sys/kernel/random/uuid)
key="$platform:$chat_id" # the conversation key (docs/producing.md § The key)

fail() {
  echo "kcat client: $2" >&2
  exit "$1"
}

# The fields docs/producing.md requires; `type` is optional and says what the record is.
message=$(jq -cn --arg id "$id" --arg platform "$platform" --arg chat_id "$chat_id" \
  --arg user "${USER_ID:-alice}" --arg text "${TEXT:-calculate 6*7}" \
  '{type: "inbound.message", id: $id, platform: $platform, chat_id: $chat_id, user: {id: $user}, text: $text}')

# A group of its own, started before the message is sent; a new group starts at the beginning, so
# nothing of the answer is missed however long the join takes. The embedded broker answers a fetch
# only when its wait expires (docs/clients.md), hence fetch.wait.max.ms=10.
coproc CONSUMER {
  exec kcat -C -q -u -b "$bootstrap" -G "$group" -X auto.offset.reset=earliest -X fetch.wait.max.ms=10 \
    -f '%s\n' "${prefix}events" 2>&1
}
consumer_pid=$CONSUMER_PID
stop_consumer() { kill -TERM "$consumer_pid" 2>/dev/null || true; wait "$consumer_pid" 2>/dev/null || true; }
trap stop_consumer EXIT

# librdkafka's default partitioner is CRC32-based; agentstream's topics are partitioned by murmur2
# of the key, as Kafka's Java client does (docs/producing.md § The key). kcat -P exits non-zero
# when the record is not delivered.
printf '%s\n' "$message" | kcat -P -b "$bootstrap" -t "${prefix}inbound" -k "$key" -X partitioner=murmur2_random \
  || fail 2 "producing to ${prefix}inbound failed"
echo "produced ${prefix}inbound key=$key id=$id" >&2

root=""
deadline=$((SECONDS + ${timeout_s%.*}))
while ((SECONDS < deadline)); do
  if ! IFS= read -r -t 1 line <&"${CONSUMER[0]}"; then
    kill -0 "$consumer_pid" 2>/dev/null || fail 2 "kcat stopped consuming ${prefix}events"
    continue
  fi
  # kcat's own messages (errors) are not JSON: say them, go on.
  event=$(jq -ce 'objects' <<<"$line" 2>/dev/null) || { echo "kcat: $line" >&2; continue; }
  IFS=$'\t' read -r type run_id root_run_id seq inbound_id < <(jq -r '[.type, .run_id, .root_run_id, .seq, (.inbound_id // "")] | @tsv' <<<"$event")
  if [[ -z $root && $type == run.queued && $inbound_id == "$id" ]]; then
    root=$root_run_id
  fi
  [[ -n $root && $root_run_id == "$root" ]] || continue
  echo "event seq=$seq type=$type" >&2
  if [[ $type == run.finished && $run_id == "$root" ]]; then
    # kcat commits the offsets it consumed when it closes (SIGTERM closes it cleanly).
    stop_consumer
    status=$(jq -r .status <<<"$event")
    [[ $status == completed ]] || fail 1 "the run ended $status: $(jq -r '.error // ""' <<<"$event")"
    jq -r .text <<<"$event"
    exit 0
  fi
done
fail 2 "timed out after ${timeout_s}s waiting for the answer to $id (root run ${root:-unknown})"
