#!/usr/bin/env python3
"""Where a real round's time goes: the critical path of each beacon interval.

Reads the nodes' logs of a local network run with timeline traces, e.g.

    RUST_LOG=info,timeline=trace sbft-beacon localnet --nodes 4 --rounds 100 \
        --latency-ms 20 --dir /tmp/net
    scripts/critical-path.py /tmp/net --link-ms 20

For each beacon a node learned live, it walks back from the input that
completed the beacon to the time the node learned the previous one, through
the message that enabled each input (or the node's own previous work when that
finished later), and splits the interval into:

  sign       handling an input: hashing to the curve and scalar
             multiplications (signing shares)
  verify     handling an input: pairing checks (shares, proofs, beacons)
  combine    handling an input: multi-scalar multiplications (combining
             shares, batch checks' sums)
  cpu        handling an input, on a core, the rest (the replica's thread
             CPU less the three above: hashing, encoding, bookkeeping)
  preempt    handling an input, but not on a core (wall - CPU)
  queue      decoded, waiting for the node's event loop
  timer      waiting for one of the node's timers (e.g. a collector's
             fast-path wait), from the node's previous work
  dec_cpu    decoding a frame (points: decompression and subgroup checks)
  dec_wait   decoding, but not on a core
  dec_spawn  read, waiting for a decoding thread
  persist    the durable write of the vote record, before sending
  sendgap    handled (and persisted), until the writer flushed the frame
  link       the link's latency (--link-ms), on the wire
  stack      flush to read beyond the link: the network stack, the relays
             and the receiver's wake-up
  network    flush to read, when no --link-ms is given (links of different
             latencies, e.g. a region table)

and prints the mean of each per round. Standard library only.
"""

import argparse
import bisect
import collections
import glob
import os
import re
import sys

EVENT = re.compile(r"timeline: (\w+) at=(\d+)(.*)")
FIELD = re.compile(r'(\w+)=("[^"]*"|\S+)')


def load(path):
    """One node's log: its work (handled inputs and durable writes, by end),
    reads, decodes and flushes by peer, and the beacons it learned."""
    work, beacons = [], []
    reads, decoded, flushes = (collections.defaultdict(list) for _ in range(3))
    decode_info = {}
    for line in open(path, errors="replace"):
        m = EVENT.search(line)
        if not m:
            continue
        kind, at, rest = m.group(1), int(m.group(2)), dict(FIELD.findall(m.group(3)))
        if kind == "handled":
            work.append({"type": "handled", "start": at, "end": at + int(rest["wall_us"]),
                         "cpu": int(rest["cpu_us"]), "from": int(rest["from"]),
                         "timer": rest.get("kind") == '"timer"',
                         # Older traces have no split: all of it is "cpu".
                         "crypto": [(k, int(rest.get(k + "_us", 0)))
                                    for k in ("sign", "verify", "combine")]})
        elif kind == "persisted":
            work.append({"type": "persisted", "start": at, "end": at + int(rest["wall_us"])})
        elif kind == "read":
            reads[int(rest["from"])].append(at)
        elif kind == "decoded":
            decoded[int(rest["from"])].append(at)
            if "started" in rest:
                decode_info[at] = (int(rest["started"]), int(rest["cpu_us"]))
        elif kind == "flushed":
            flushes[int(rest["to"])].append(at)
        elif kind == "beacon":
            beacons.append((int(rest["round"]), at))
    work.sort(key=lambda w: w["end"])
    return {"work": work, "ends": [w["end"] for w in work], "reads": reads,
            "decoded": decoded, "decode_info": decode_info, "flushes": flushes,
            "beacons": beacons}


def latest(times, t):
    i = bisect.bisect_right(times, t) - 1
    return times[i] if i >= 0 else None


def work_before(node, t, exclude=None):
    """The node's last piece of work that ended by `t` (1 us slack)."""
    i = bisect.bisect_right(node["ends"], t + 1) - 1
    while i >= 0 and node["work"][i] is exclude:
        i -= 1
    return node["work"][i] if i >= 0 else None


def handled_at(node, t):
    """The input whose handling started at `t` (the beacon's `at`)."""
    for w in node["work"]:
        if w["type"] == "handled" and w["start"] == t:
            return w
    return None


def walk(nodes, me, start, end, link_us):
    """Segments (category, from, to) of the critical path into `end`."""
    segments = []
    node, current = me, handled_at(nodes[me], end)
    for _ in range(200):
        if current is None or current["end"] <= start:
            break
        n = nodes[node]
        while current is not None and current["type"] == "persisted":
            segments.append(("persist", current["start"], current["end"]))
            before = work_before(n, current["start"], current)
            if before is not None:
                segments.append(("sendgap", before["end"], current["start"]))
            current = before
        if current is None:
            break
        # The cryptography's wall time, within the handling's CPU (its timings
        # are wall clock: capped by the CPU, so that preemption stays apart).
        t = current["start"]
        cpu_end = current["start"] + current["cpu"]
        for category, us in current["crypto"]:
            segments.append((category, t, min(t + us, cpu_end)))
            t = min(t + us, cpu_end)
        segments.append(("cpu", t, cpu_end))
        segments.append(("preempt", current["start"] + current["cpu"], current["end"]))
        previous = work_before(n, current["start"], current)
        sender = current["from"]
        got = latest(n["decoded"].get(sender, []), current["start"] + 5) if sender != node else None
        if got is not None and (previous is None or got >= previous["end"]) and sender in nodes:
            segments.append(("queue", got, current["start"]))
            read = latest(n["reads"][sender], got)
            info = n["decode_info"].get(got)
            if info:
                began, cpu = info
                segments += [("dec_spawn", read, began), ("dec_cpu", began, began + cpu),
                             ("dec_wait", began + cpu, got)]
            else:
                segments.append(("dec_cpu", read, got))
            flushed = latest(nodes[sender]["flushes"].get(node, []), read)
            if flushed is None:
                break
            if link_us > 0:
                wire = max(flushed, read - link_us)
                segments += [("link", wire, read), ("stack", flushed, wire)]
            else:
                segments.append(("network", flushed, read))
            node, n = sender, nodes[sender]
            current = work_before(n, flushed)
            if current is not None:
                segments.append(("sendgap", current["end"], flushed))
        else:
            if previous is not None:
                wait = "timer" if current.get("timer") else "queue"
                segments.append((wait, previous["end"], current["start"]))
            current = previous
    return segments


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="the localnet --dir (node-*/node.log)")
    parser.add_argument("--link-ms", type=float, default=0.0,
                        help="one-way latency of every link (--latency-ms), split off "
                             "the network time as 'link'")
    args = parser.parse_args()
    nodes = {}
    for path in sorted(glob.glob(os.path.join(args.dir, "node-*", "node.log"))):
        nodes[int(re.search(r"node-(\d+)", path).group(1))] = load(path)
    if not any(n["beacons"] for n in nodes.values()):
        sys.exit("no 'timeline: beacon' lines: run the nodes with RUST_LOG=info,timeline=trace")
    totals, rounds, span = collections.Counter(), 0, 0
    for me, node in nodes.items():
        for (r0, t0), (r1, t1) in zip(node["beacons"], node["beacons"][1:]):
            if r1 != r0 + 1:
                continue
            per = collections.Counter()
            for category, a, b in walk(nodes, me, t0, t1, args.link_ms * 1000):
                a, b = max(a, t0), min(b, t1)
                if b > a:
                    per[category] += b - a
            totals.update(per)
            rounds += 1
            span += t1 - t0
    if rounds == 0:
        sys.exit("no two consecutive beacons learned by one node")
    print(f"{rounds} beacon intervals, mean {span / rounds / 1000:.2f} ms; "
          f"critical path per interval (ms):")
    for category, us in totals.most_common():
        print(f"  {category:10s} {us / rounds / 1000:7.2f}")
    print(f"  {'(walked)':10s} {sum(totals.values()) / rounds / 1000:7.2f}")


if __name__ == "__main__":
    main()
