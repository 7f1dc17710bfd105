# Prints the figures of several bench/run.sh results files side by side, one column per
# PostgreSQL major (`make bench PG="15 17 18"`, bench/majors.sh): each figure of bench/report.rb,
# then its comparison and their ratio (or whether the target is met) on rows of their own.
#
#   ruby bench/majors_report.rb "settings line" 15=RESULTS_FILE 17=RESULTS_FILE ...
settings = ARGV[0] || ""
majors = ARGV[1..].map { |a| a.split("=", 2) }
# [figure, label] => { major => cell }, in the order they first appear
cells = Hash.new { |h, k| h[k] = {} }
versions = {}
majors.each do |major, path|
  versions[major] = File.foreach(path).find { |l| l.start_with?("server_versions=") }.to_s.chomp.split("=", 2)[1] || "?"
  rows = IO.popen(["ruby", File.join(__dir__, "report.rb"), path, "--rows"], &:read).lines.map { |l| l.chomp.split("\t", -1) }
  rows.each do |figure, jobbuf, cmp_name, cmp, ratio, target, met|
    cells[[figure, figure]][major] = jobbuf
    if cmp_name == "target"
      cells[[figure, "  #{target}"]][major] = met
      next
    end
    # a sub-figure ("  same, ...") is compared with its figure's comparison, shown above it
    cells[[figure, "  #{cmp_name}"]][major] = cmp if cmp != "-" && !figure.start_with?(" ")
    cells[[figure, "  ratio, #{target}"]][major] = met == "NO" ? "#{ratio} NO" : ratio if ratio != "-"
  end
end

table = cells.map { |(_, label), m| [label] + majors.map { |major, _| m[major] || "-" } }
headers = ["figure"] + majors.map(&:first)
widths = headers.each_index.map { |i| ([headers[i]] + table.map { |x| x[i].to_s }).map(&:length).max }
line = ->(row) { row.each_with_index.map { |c, i| i == 0 ? c.to_s.ljust(widths[i]) : c.to_s.rjust(widths[i]) }.join(" | ") }
puts "jobbuf benchmark on several PostgreSQL majors (#{settings})"
majors.each { |major, _| puts "  #{major}: #{versions[major]}" }
puts line.(headers)
puts widths.map { |w| "-" * w }.join("-+-")
table.each { |x| puts line.(x) }
