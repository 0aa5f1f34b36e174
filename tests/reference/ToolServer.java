// Kafka's command-line tools run one after another in one JVM, for the reference tests
// (tests/reference/kafka.py ToolServer): a fresh JVM per command costs about a second on this machine,
// and the tests run a few hundred. Each request is one JSON line on stdin,
//     {"main": "org.apache.kafka.tools.TopicCommand", "args": [...], "stdin": "..."}
// and each answer one JSON line on the original stdout: {"rc": N, "stdout": "...", "stderr": "..."}.
// The tool's main() runs as bin/kafka-*.sh runs it, with System.out, System.err and System.in replaced
// for its run (the log4j2 console appender follows System.err). Kafka's Exit.exit ends the run as
// System.exit ends the JVM: its code is the run's, and nothing the tool prints after it counts (a tool
// that exits inside its own try/catch, as TopicCommand does, would otherwise print the exception that
// unwinds it). The shutdown hooks a run adds through Kafka's Exit (closing its clients) run when it ends,
// as they would when its JVM exits; without them a ConsoleProducer's client would live on and log into
// later runs.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.utils.internals.Exit;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;

public final class ToolServer {
    /** Thrown by Kafka's Exit.exit/halt while a tool runs: the run ends with this code. */
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("exit " + code, null, false, false);
            this.code = code;
        }
    }

    public static void main(String[] ignored) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        BufferedReader requests = new BufferedReader(
            new InputStreamReader(new FileInputStream(FileDescriptor.in), StandardCharsets.UTF_8));
        ObjectMapper json = new ObjectMapper();
        Exit.setExitProcedure((code, message) -> exit(code));
        Exit.setHaltProcedure((code, message) -> exit(code));
        Exit.setShutdownHookAdder((name, hook) -> HOOKS.add(new Thread(hook, name == null ? "shutdown-hook" : name)));
        // Some paths call System.exit itself (argparse4j's parseArgsOrFail): the same end of a run. Java 17
        // still lets a security manager see it (-Djava.security.manager=allow); a JDK without one (24+)
        // dies there, and the caller starts a new server.
        try {
            System.setSecurityManager(new SecurityManager() {
                @Override
                public void checkPermission(java.security.Permission permission) {
                }

                @Override
                public void checkPermission(java.security.Permission permission, Object context) {
                }

                @Override
                public void checkExit(int status) {
                    exit(status);
                }
            });
        } catch (UnsupportedOperationException noSecurityManager) {
            // System.exit ends the server
        }
        String line;
        while ((line = requests.readLine()) != null) {
            JsonNode request = json.readTree(line);
            String[] args = new String[request.path("args").size()];
            for (int i = 0; i < args.length; i++) {
                args[i] = request.path("args").get(i).asText();
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(request.path("stdin").asText("").getBytes(StandardCharsets.UTF_8)));
            exitCode = null;
            PrintStream runOut = System.out;
            PrintStream runErr = System.err;
            int rc = run(request.path("main").asText(), args);
            if (exitCode != null) {
                rc = exitCode;
            }
            System.setOut(runOut);  // what the hooks print is the run's, as after a JVM's System.exit
            System.setErr(runErr);
            runShutdownHooks();
            System.out.flush();
            System.err.flush();
            ObjectNode answer = json.createObjectNode();
            answer.put("rc", rc);
            answer.put("stdout", out.toString(StandardCharsets.UTF_8));
            answer.put("stderr", err.toString(StandardCharsets.UTF_8));
            answers.println(json.writeValueAsString(answer));
        }
    }

    private static final java.util.List<Thread> HOOKS = new java.util.ArrayList<>();

    /** A JVM starts its shutdown hooks together and waits for them; so does the end of a run (a minute at most). */
    private static void runShutdownHooks() throws InterruptedException {
        for (Thread hook : HOOKS) {
            hook.start();
        }
        for (Thread hook : HOOKS) {
            hook.join(60_000);
        }
        HOOKS.clear();
    }

    /** The code of the run's first Exit.exit, or null while it has not exited. */
    private static volatile Integer exitCode;
    private static final PrintStream DISCARD = new PrintStream(OutputStream.nullOutputStream());

    private static void exit(int code) {
        if (exitCode == null) {
            exitCode = code;
            System.setOut(DISCARD);
            System.setErr(DISCARD);
        }
        throw new ExitCalled(code);
    }

    private static int run(String mainClass, String[] args) {
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
            return 0;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof ExitCalled || exitCode != null) {
                return exitCode;
            }
            // what the JVM prints for an exception that escapes main, and its exit code
            System.err.print("Exception in thread \"main\" ");
            cause.printStackTrace();
            return 1;
        } catch (ReflectiveOperationException e) {
            System.err.println("Error: Could not find or load main class " + mainClass);
            return 1;
        }
    }
}
