import Foundation
import Testing
import TestSupport

/// Runs the agent binary to completion and returns exit code, stdout and stderr.
func runAgent(_ arguments: [String], timeout: Double = 20) throws -> (code: Int32, out: String, err: String) {
    try runAgentProgram(agentBinary, arguments, timeout: timeout)
}

/// Runs a program (the agent, or the agent through env(1)) to completion.
func runAgentProgram(_ program: String, _ arguments: [String], timeout: Double = 20) throws -> (code: Int32, out: String, err: String) {
    let child = try Child(program, arguments)
    guard let code = child.wait(timeout) else {
        child.signal(SIGKILL)
        Issue.record("\(program) \(arguments) did not finish")
        return (-1, child.stdout, child.stderr)
    }
    return (code, child.stdout, child.stderr)
}
