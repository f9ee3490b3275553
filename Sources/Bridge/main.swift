import BridgeKit
import Glibc
import ParkWiseCLI

StopSignals.takeOver()   // before any thread starts
CommandSpec.program = "parkwise-bridge"
exit(BridgeCommands.main(Array(CommandLine.arguments.dropFirst())))
