# Job-by-job comparison for the fault-injection run (test/faults/delivery_faults.sh).
#
# usage: ruby compare_delivery.rb LIST_DUMP UPFRONT_COUNT DIR
#   LIST_DUMP      the Redis list, one element (the job's JSON payload) per line
#   UPFRONT_COUNT  jobs 1..UPFRONT_COUNT were staged (and committed) up front
#   DIR            committed*.log, unknown*.log, aborted*.log (stage_client.rb's logs and the
#                  script's bursts) and never_committed.log (numbers staged in transactions whose
#                  backend was killed)
#
# Prints one "name value" line per figure and exits 1 unless lost, duplicated and phantom are 0.
require "json"

dump, upfront, dir = ARGV
upfront = Integer(upfront)
# committed*.log, unknown*.log, aborted*.log: the client's logs and the script's own (bursts).
read_numbers = lambda do |pattern|
  Dir.glob(File.join(dir, pattern)).sort.flat_map { |path| File.readlines(path).map { |l| Integer(l) } }
end

committed = read_numbers.call("committed*.log")
unknown = read_numbers.call("unknown*.log")
aborted = read_numbers.call("aborted*.log")
never = read_numbers.call("never_committed.log")

seen = Hash.new(0)
unparsable = 0
File.foreach(dump) do |line|
  line = line.chomp
  next if line.empty?
  begin
    seen[Integer(JSON.parse(line).fetch("n"))] += 1
  rescue StandardError
    unparsable += 1
  end
end

must = Hash.new(false)
(1..upfront).each { |n| must[n] = true }
committed.each { |n| must[n] = true }
may = {}
unknown.each { |n| may[n] = true }

lost = must.keys.reject { |n| seen.key?(n) }
duplicated = seen.select { |_, c| c > 1 }
phantom = seen.keys.reject { |n| must[n] || may[n] }
aborted_set = aborted.to_h { |n| [n, true] }
phantom_aborted = phantom.count { |n| aborted_set[n] }
unknown_delivered = unknown.count { |n| seen.key?(n) }

def sample(list)
  list.sort.first(10).join(",")
end

puts "elements_in_redis #{seen.values.sum + unparsable}"
puts "distinct_jobs_in_redis #{seen.size}"
puts "jobs_checked #{must.size + unknown.size + aborted.size + never.size}"
puts "must_deliver #{must.size} (up-front #{upfront}, later commits #{committed.size})"
puts "unknown_outcome #{unknown.size} (delivered #{unknown_delivered}, not delivered #{unknown.size - unknown_delivered})"
puts "never_committed #{aborted.size + never.size} (client rollbacks/errors #{aborted.size}, killed mid-transaction #{never.size})"
puts "unparsable_elements #{unparsable}"
puts "lost #{lost.size}#{lost.empty? ? '' : " e.g. #{sample(lost)}"}"
puts "duplicated #{duplicated.size}#{duplicated.empty? ? '' : " (extra copies #{duplicated.values.sum - duplicated.size}) e.g. #{sample(duplicated.keys)}"}"
puts "phantom #{phantom.size}#{phantom.empty? ? '' : " (#{phantom_aborted} of them rolled back or failed) e.g. #{sample(phantom)}"}"
exit(lost.empty? && duplicated.empty? && phantom.empty? && unparsable.zero? ? 0 : 1)
