# Samples the drain under sustained load every INTERVAL seconds for DURATION seconds and prints
# one row per sample: size of jobbuf.jobs (heap + indexes), its dead and (approximate) live tuples,
# autovacuum runs, storage rotations (a new file for jobbuf.jobs), jobs delivered in the window, the worker's RSS (VmRSS and RssAnon from
# /proc/<pid>/status) and the commit-to-Redis latency of the window (read from the latency
# probe's --out file). Ends with a verdict line per series and a machine-readable "RESULT" line.
#
# The Redis list that receives the load (BG_KEY) is UNLINKed after each sample (O(1) for Redis,
# freed in a background thread) so that a long run does not fill Redis' memory.
#
#   ruby bench/sustain_sampler.rb LABEL DURATION INTERVAL WORKER_PID LATENCY_FILE BG_KEY
require "pg"
require "redis"

label, duration, interval, pid, lat_file, bg_key = ARGV[0], Float(ARGV[1]), Float(ARGV[2]), Integer(ARGV[3]), ARGV[4], ARGV[5]
pg = PG.connect
redis = Redis.new(host: "127.0.0.1", port: Integer(ENV.fetch("REDIS_PORT")))

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def proc_kb(pid, field)
  File.foreach("/proc/#{pid}/status") { |l| return l.split[1].to_i if l.start_with?("#{field}:") }
  nil
rescue Errno::ENOENT
  nil
end

def pct(sorted, p) = sorted.empty? ? nil : sorted[((sorted.size - 1) * p).floor]

def sample(pg, pid)
  r = pg.exec(<<~SQL)[0]
    SELECT pg_total_relation_size('jobbuf.jobs') AS bytes, s.n_dead_tup AS dead, s.n_live_tup AS live,
           s.autovacuum_count AS autovacuums, w.delivered, pg_relation_filenode('jobbuf.jobs') AS filenode
    FROM pg_stat_user_tables s, jobbuf_worker_status() w
    WHERE s.relid = 'jobbuf.jobs'::regclass
  SQL
  r.transform_values!(&:to_i)
  r["rss_kb"] = proc_kb(pid, "VmRSS")
  r["anon_kb"] = proc_kb(pid, "RssAnon")
  r
end

lat_pos = File.exist?(lat_file) ? File.size(lat_file) : 0
read_latencies = lambda do
  return [] unless File.exist?(lat_file)
  File.open(lat_file) do |f|
    f.seek(lat_pos)
    data = f.read
    cut = data.rindex("\n")
    return [] unless cut
    lat_pos += cut + 1
    data[0..cut].lines.map { |l| l.split[1].to_f / 1000.0 }
  end
end

puts format("%-6s %7s %10s %9s %9s %4s %9s %9s %9s %8s %8s %8s %5s",
            "label", "t(s)", "size(kB)", "dead", "live~", "av", "deliv/s", "rss(kB)", "anon(kB)",
            "p50(ms)", "p99(ms)", "max(ms)", "n")
rows = []
t_start = now
prev = sample(pg, pid)
prev0 = prev
prev_t = t_start
read_latencies.call
k = 1
while (t_next = t_start + k * interval) <= t_start + duration + 0.01
  sleep [t_next - now, 0].max
  s = sample(pg, pid)
  t = now
  redis.unlink(bg_key)
  lats = read_latencies.call.sort
  s["t"] = t - t_start
  s["rate"] = (s["delivered"] - prev["delivered"]) / (t - prev_t)
  s["p50"], s["p99"], s["max"], s["n"] = pct(lats, 0.5), pct(lats, 0.99), lats.last, lats.size
  rows << s
  f = ->(v) { v ? format("%.2f", v) : "-" }
  puts format("%-6s %7.1f %10d %9d %9d %4d %9.0f %9s %9s %8s %8s %8s %5d",
              label, s["t"], s["bytes"] / 1024, s["dead"], s["live"], s["autovacuums"], s["rate"],
              s["rss_kb"] || "-", s["anon_kb"] || "-", f[s["p50"]], f[s["p99"]], f[s["max"]], s["n"])
  $stdout.flush
  prev, prev_t = s, t
  k += 1
end

# Levels off: the maximum over the second half of the run is within 25% (size, dead tuples) or
# 5% (RSS) of the maximum over the first half (the first sample is warm-up and left out).
def verdict(rows, key, slack, floor)
  vals = rows.drop(1).map { |r| r[key] }.compact
  return ["n/a", 0, 0] if vals.size < 2
  half = vals.size / 2
  first, second = vals[0...half].max, vals[half..].max
  ok = second <= first * (1 + slack) + floor
  [ok ? "levels off" : "still growing", first, second]
end

results = {}
[["size", "bytes", 0.25, 1024 * 1024], ["dead", "dead", 0.25, 5000], ["rss", "rss_kb", 0.05, 1024],
 ["anon", "anon_kb", 0.05, 512]].each do |name, key, slack, floor|
  v, a, b = verdict(rows, key, slack, floor)
  puts format("%-6s %-5s %-14s (max first half %d, max second half %d)", label, name, v, a, b)
  results["#{name}_verdict"] = v.tr(" ", "_")
  results["#{name}_first"] = a
  results["#{name}_second"] = b
end
all_lat = File.exist?(lat_file) ? File.readlines(lat_file).map { |l| l.split[1].to_f / 1000.0 }.sort : []
results["rate"] = rows.empty? ? 0 : rows.map { |r| r["rate"] }.sum / rows.size
results["end_bytes"] = rows.last ? rows.last["bytes"] : 0
results["end_dead"] = rows.last ? rows.last["dead"] : 0
results["max_bytes"] = rows.map { |r| r["bytes"] }.max || 0
results["max_dead"] = rows.map { |r| r["dead"] }.max || 0
# Storage rotations seen (docs/storage.md): each gives jobbuf.jobs a new file.
results["rotations"] = rows.each_cons(2).count { |a, b| a["filenode"] != b["filenode"] } + (rows.first && rows.first["filenode"] != prev0["filenode"] ? 1 : 0)
results["end_live"] = rows.last ? rows.last["live"] : 0
results["p50"] = pct(all_lat, 0.5) || 0
results["p99"] = pct(all_lat, 0.99) || 0
results["max"] = all_lat.last || 0
puts "RESULT " + results.map { |k2, v| "#{label}_#{k2}=#{v.is_a?(Float) ? format('%.3f', v) : v}" }.join(" ")
