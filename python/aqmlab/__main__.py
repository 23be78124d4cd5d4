from aqmlab.cli.main import main

main()
