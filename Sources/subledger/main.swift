print("subledger")
