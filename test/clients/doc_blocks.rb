# Extracts the fenced code blocks of docs/clients.md and of the README's "Clients" section for
# test/e2e/clients_docs.sh. A block is "not runnable" when the line before its fence is
# `<!-- not runnable: reason -->`.
#   ruby doc_blocks.rb ROOT OUT_DIR   writes OUT_DIR/NN.<lang> and prints one line per block:
#                                     NN<TAB>lang<TAB>file:line<TAB>"run" or the reason
SOURCES = [["docs/clients.md", nil], ["README.md", /\A## Clients/]].freeze
root, out = ARGV
n = 0
SOURCES.each do |file, section|
  lines = File.readlines(File.join(root, file), chomp: true)
  inside = section.nil?
  i = 0
  while i < lines.size
    line = lines[i]
    inside = line.match?(section) if section && line.start_with?("## ")
    if inside && (m = line.match(/\A```(\w+)\s*\z/))
      start = i + 1
      i += 1
      i += 1 until lines[i] == "```"
      previous = lines[start - 2].to_s
      reason = previous[/\A<!-- not runnable: (.*) -->\z/, 1]
      n += 1
      name = format("%02d", n)
      File.write(File.join(out, "#{name}.#{m[1]}"), lines[start...i].join("\n") + "\n")
      puts [name, m[1], "#{file}:#{start}", reason || "run"].join("\t")
    end
    i += 1
  end
end
