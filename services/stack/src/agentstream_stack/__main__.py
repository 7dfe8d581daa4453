from agentstream_stack.cli import main

main()
