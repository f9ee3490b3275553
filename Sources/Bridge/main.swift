import Glibc
import ParkWiseCLI

CommandSpec.program = "parkwise-bridge"
exit(BridgeCommands.main(Array(CommandLine.arguments.dropFirst())))
