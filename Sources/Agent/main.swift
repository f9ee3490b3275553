import Glibc
let arguments = Array(CommandLine.arguments.dropFirst())
// Most commands (`run` among them) before the first await: they never start Swift concurrency's threads.
if let code = Commands.mainWithoutConcurrency(arguments) { exit(code) }
exit(await Commands.main(arguments))
