# Extracts the fenced code blocks of Markdown files for the tests that run them
# (test/e2e/docs_blocks.sh: README.md and docs/*.md; test/e2e/clients_docs.sh: docs/clients.md).
# Plain Ruby, no gem.
#
#   ruby doc_blocks.rb ROOT OUT_DIR FILE...   writes OUT_DIR/NN.<lang> and prints one line per
#   block: NN<TAB>lang<TAB>file:line<TAB>how<TAB>argument<TAB>prints
#
# how is what the test does with the block, read from the HTML comments on the lines right
# before its fence (invisible when the Markdown is rendered):
#   run          no comment: run it (sql with psql, sh with bash, js with node, python, ruby)
#   file         <!-- file: PATH -->: write it to PATH in the page's directory (run by a later block)
#   background   <!-- background: TEXT -->: start it, wait until its output holds TEXT, stop it
#   skip         <!-- not runnable: REASON -->, "not runnable" in the paragraph right before the
#                block or in its first line, or an info string that is no language the test runs
#                (text, ini, none: a file or an output shown for reading); argument: the reason
# <!-- prints: TEXT --> (with run): the block's output must hold TEXT.
# <!-- in the repository --> (with run): run it from the repository's root, not the page's
# directory. A page's blocks run in order, in one directory and one database, so the blocks of
# one program (a file, then the command that runs it) are simply consecutive.
RUNNABLE = %w[sql sh bash js python ruby].freeze

root, out, *files = ARGV
n = 0
files.each do |file|
  lines = File.readlines(File.join(root, file), chomp: true)
  i = 0
  while i < lines.size
    m = lines[i].match(/\A```(\S*)\s*\z/)
    unless m
      i += 1
      next
    end
    fence = i
    i += 1
    i += 1 until i >= lines.size || lines[i] == "```"
    body = lines[(fence + 1)...i]
    i += 1
    lang = m[1].empty? ? "none" : m[1]
    lang = "sh" if lang == "bash"

    directives = {}
    j = fence - 1
    j -= 1 while j >= 0 && lines[j].strip.empty?
    while j >= 0 && (d = lines[j].strip.match(/\A<!-- ([a-z ]+?)(?::\s*(.*?))? -->\z/))
      directives[d[1]] = d[2].to_s
      j -= 1
    end
    paragraph = []
    while j >= 0 && !lines[j].strip.empty? && !lines[j].start_with?("```", "#")
      paragraph.unshift(lines[j])
      j -= 1
    end
    paragraph = paragraph.join(" ")

    how, arg = if directives.key?("not runnable")
                 ["skip", directives["not runnable"]]
               elsif !RUNNABLE.include?(lang)
                 ["skip", "for reading (#{lang})"]
               elsif (r = paragraph[/\(?not runnable[^)]*/i])
                 ["skip", r.delete_prefix("(")]
               elsif body.first.to_s.match?(/not runnable/i)
                 ["skip", body.first.sub(%r{\A\s*(--|//|#)\s*}, "")]
               elsif directives.key?("file")
                 ["file", directives["file"]]
               elsif directives.key?("background")
                 ["background", directives["background"]]
               elsif directives.key?("in the repository")
                 ["repo", ""]
               else
                 ["run", ""]
               end
    n += 1
    name = format("%02d", n)
    File.write(File.join(out, "#{name}.#{lang}"), body.join("\n") + "\n")
    puts [name, lang, "#{file}:#{fence + 1}", how, arg.gsub(/\s+/, " "), directives["prints"].to_s].join("\t")
  end
end
