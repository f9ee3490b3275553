import Glibc
import AgentKit
import ParkWiseCLI

StopSignals.takeOver()   // before any thread starts
let arguments = Array(CommandLine.arguments.dropFirst())
// Most commands (`run` among them) before any Swift concurrency: they never start its threads.
if let code = Commands.mainWithoutConcurrency(arguments) { exit(code) }
// The rest run as a task while the main thread waits with the signals still blocked. (An async main would end in
// dispatch_main, which parks the main thread in sigsuspend with every signal unblocked: a Ctrl-C would go there and
// kill the process instead of reaching StopSignals.)
Task.detached { [arguments] in exit(await Commands.main(arguments)) }
while true { pause() }
